"""A withdrawn estimate's rates against a real Redis and in every reader of them: the jobs
role withdraws on a refusal for a failed assumption only, never over rates configured since,
and the values and evaluations that use the model's rates say ``noise_rates_withdrawn``."""

from __future__ import annotations

import numpy as np

from app.learners.noise_publish import ANCHOR_EVERY
from app.store import ModelKeys, Store
from app.store.noise import WITHDRAWN, NoiseRecord
from app.store.values import value_rates
from app.worker_settings import WorkerSettings
from tests.learners.test_noise_anchor import epsilon_greedy_plays
from tests.workers.conftest import create_model, model_config
from workers.evaluations import ranking_rates
from workers.worker import Worker

K, RATES = 9, (0.2, 0.3)
SLOTS = [{"slot": k, "theta": theta, "rho0": 0.1, "rho1": 0.2,
          "interval": {"theta": [theta - 0.02, theta + 0.02], "rho0": [0.08, 0.12],
                       "rho1": [0.18, 0.22]}}
         for k, theta in enumerate((1.0, 0.6))]


async def _refresh(store: Store, mk: ModelKeys, n: int, seed: int, against_clicks: bool
                   ) -> None:
    """``n`` anchor rows (an oracle scorer's plays, or scored against their clicks: refused
    ``anchor_unchecked``), then one pass of the jobs role."""
    prob, score, click = epsilon_greedy_plays(n, K, 0.05, 0.7, RATES, seed)
    if against_clicks:
        score = np.where(score < 1.0, score - 0.5 * click, score)
    await store.anchors.append(mk, prob, score, click, {}, cap=50_000)
    await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n",
                                       nrest_threads=True)).drain()


async def test_the_jobs_role_withdraws_on_a_failed_assumption_only(store: Store) -> None:
    mk = await create_model(store, model_config("m", algorithm="linucb_diag",
                                                n_classes=K, params={}))
    await store.anchors.state_one_right_label(mk, True)  # one right label per play
    await _refresh(store, mk, 40_000, 0, against_clicks=False)
    published = await store.noise.get(mk)
    assert published is not None and published.status == "published", published
    # refused for want of data (a max_width no estimate meets): left in force
    await store.anchors.configure(mk, max_width=0.001)
    await _refresh(store, mk, ANCHOR_EVERY, 1, against_clicks=False)
    last = (await store.anchors.settings(mk)).last
    kept = await store.noise.get(mk)
    assert last is not None and kept is not None
    assert await store.anchors.new_counts([mk]) == [0]  # the estimate ran (and was refused)
    assert last["status"] == "published"  # the published outcome stays on show
    assert (kept.status, kept.withdrawn) == ("published", ""), kept
    await store.anchors.configure(mk, max_width=0.1)
    await _refresh(store, mk, 40_000, 2, against_clicks=True)
    withdrawn = await store.noise.get(mk)
    assert withdrawn is not None
    assert (withdrawn.status, withdrawn.source, withdrawn.withdrawn) == (
        "insufficient_data", "estimated", "anchor_unchecked"), withdrawn
    assert (withdrawn.rho0, withdrawn.rho1) == (published.rho0, published.rho1)
    assert withdrawn.calibration_unreliable and not withdrawn.rates_reliable
    # rates configured since are never withdrawn; configuring clears a withdrawal
    await store.noise.put(mk, 0.1, 0.1, source="configured")
    assert not await store.noise.withdraw(mk, "anchor_unchecked")
    configured = await store.noise.get(mk)
    assert configured is not None and configured.withdrawn == "" and configured.status != (
        "insufficient_data")


def test_values_and_evaluations_at_withdrawn_rates_say_so() -> None:
    last = {"status": "published", "rho0": 0.1, "rho1": 0.2,
            "interval": {"level": 0.95, "rho0": [0.05, 0.15], "rho1": [0.15, 0.25]}}
    record = NoiseRecord(0.1, 0.2, "estimated", slots=SLOTS)
    withdrawn = NoiseRecord(0.1, 0.2, "estimated", slots=SLOTS, withdrawn="anchor_not_flat")
    assert value_rates(record, last)[1] is None
    rates, reason = value_rates(withdrawn, last)
    assert reason == WITHDRAWN and (rates.rho0, rates.rho1) == (0.1, 0.2)
    assert ranking_rates({}, record)[1] == {"rates": "model", "calibration_unreliable": False}
    by, flags = ranking_rates({}, withdrawn)
    assert "slot_rates" in by  # still the per-slot correction in force, flagged
    assert flags == {"rates": "model", "calibration_unreliable": True, "reason": WITHDRAWN}
