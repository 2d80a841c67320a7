"""A published anchor estimate withdrawn through the service: a later refresh refused for a
failed assumption (``anchor_unchecked``) leaves its rates in use, flagged wherever they are
shown or used (``GET .../noise``, ``debiased_reward``, each decision's ``expected_reward``,
the series point, the challengers' values), until an estimate is published again."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.store import ModelKeys, Store
from app.store.noise import WITHDRAWN
from tests.api.conftest import TestClient, new_model, new_tenant, predict_all
from tests.api.test_challengers import UNIFORM
from tests.api.test_noise_service import (
    _request_estimate,
    answer_with_noisy_clicks,
    run_nrest,
)
from tests.api.test_rank_noise_slots import append_rows
from tests.learners.test_noise_anchor import epsilon_greedy_plays

pytestmark = pytest.mark.slow

#: The anchor rows' labels (an oracle scorer's epsilon-greedy plays, rates RATES); the
#: model's events are clicked through the same rates.
K, D, RATES = 9, 4, (0.2, 0.3)


def append_plays(redis_url: str, n: int, seed: int, against_clicks: bool) -> None:
    """``n`` anchor rows appended to model ``m1``'s as its trainer appends them (its shadow
    scorer's state kept): an oracle scorer's plays, whose estimate is published, or
    (``against_clicks``) the same plays with the wrong ones scored against their clicks, a
    scorer whose lowest margins pick out no wrong plays (``anchor_unchecked``)."""
    prob, score, click = epsilon_greedy_plays(n, K, 0.05, 0.7, RATES, seed)
    if against_clicks:
        score = np.where(score < 1.0, score - 0.5 * click, score)

    async def run() -> None:
        store = Store.from_url(redis_url)
        try:
            mk = ModelKeys("acme", "m1")
            state = await store.anchors.scorer_state(mk) or {}
            await store.anchors.append(mk, prob, score, click, state, cap=50_000)
        finally:
            await store.close()
    asyncio.run(run())


def flags(client: TestClient, tenant: dict[str, str], redis_url: str,
          rng: np.random.Generator, W: np.ndarray) -> dict[str, object]:
    """Every place the rates in use are shown or used, after 200 more events."""
    answer_with_noisy_clicks(client, tenant, redis_url, rng.standard_normal((200, D)), W,
                             RATES, rng)
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    preds = predict_all(client, tenant, rng.standard_normal((5, D)))
    point = client.get("/v1/models/m1/series", headers=tenant).json()["points"][-1]
    values = client.get("/v1/models/m1/challengers", headers=tenant).json()
    assert stats["debiased_reward"] is not None and preds[0]["expected_reward"] is not None
    return {"noise": (noise["status"], noise["source"], noise["withdrawn"],
                      noise["calibration_unreliable"]),
            "rates": (noise["rho0"], noise["rho1"]), "interval": noise["interval"],
            "debiased_reward": stats["calibration_unreliable"],
            "expected_reward": {p["calibration_unreliable"] for p in preds},
            "series": (point["calibration_unreliable"], point["reason"]),
            "challengers": (values["calibration_unreliable"], values["reason"])}


def stated_model(client: TestClient, redis_url: str, seed: int,
                 *challengers: dict[str, object]
                 ) -> tuple[dict[str, str], np.random.Generator, np.ndarray]:
    """A new tenant's ``linucb_diag`` model ``m1`` whose plays have one right label each, as
    its owner states, with ``challengers`` added, after 600 clicked decisions; the tenant's
    headers, the stream's generator (seeded ``seed``) and its labels' weights ``W``."""
    tenant = new_tenant(client)
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    assert client.put("/v1/models/m1/noise", headers=tenant,
                      json={"one_right_label": True}).status_code == 200
    for challenger in challengers:
        assert client.post("/v1/models/m1/challengers", headers=tenant,
                           json=challenger).status_code == 201
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((K, D))
    answer_with_noisy_clicks(client, tenant, redis_url, rng.standard_normal((600, D)), W,
                             RATES, rng)
    return tenant, rng, W


def test_a_refusal_for_a_failed_assumption_withdraws_the_published_estimate(
        recording_client: TestClient, redis_url: str) -> None:
    client = recording_client
    tenant, rng, W = stated_model(client, redis_url, 5, UNIFORM)

    append_plays(redis_url, 40_000, seed=0, against_clicks=False)
    assert _request_estimate(client, tenant, redis_url)["estimate"]["status"] == "published"
    published = flags(client, tenant, redis_url, rng, W)
    assert published["noise"] == ("published", "estimated", None, False), published
    assert published["interval"] is not None
    assert published["debiased_reward"] is False and published["expected_reward"] == {False}
    assert published["series"] == (False, None) and published["challengers"] == (False, None)

    append_plays(redis_url, 40_000, seed=1, against_clicks=True)
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["status"], estimate["reason"]) == ("insufficient_data", "anchor_unchecked")
    withdrawn = flags(client, tenant, redis_url, rng, W)
    # the rates stay in use (the learner keeps them), flagged everywhere
    assert withdrawn["rates"] == published["rates"], withdrawn
    assert withdrawn["noise"] == ("insufficient_data", "estimated", "anchor_unchecked",
                                  True), withdrawn
    assert withdrawn["interval"] is None
    assert withdrawn["debiased_reward"] is True and withdrawn["expected_reward"] == {True}
    assert withdrawn["series"] == (True, WITHDRAWN), withdrawn
    assert withdrawn["challengers"] == (True, WITHDRAWN), withdrawn

    # published again: no longer flagged
    append_plays(redis_url, 50_000, seed=2, against_clicks=False)
    assert _request_estimate(client, tenant, redis_url)["estimate"]["status"] == "published"
    again = flags(client, tenant, redis_url, rng, W)
    assert again["noise"] == ("published", "estimated", None, False), again
    assert again["debiased_reward"] is False and again["expected_reward"] == {False}
    assert again["series"] == (False, None) and again["challengers"] == (False, None)


def test_a_statement_change_is_estimated_at_the_jobs_roles_next_poll(
        recording_client: TestClient, redis_url: str) -> None:
    """Taking one right label back queues the estimate (as ``POST .../noise/estimate``): the
    jobs role's next poll withdraws the published estimate, where before the statement took
    effect at the next periodic refresh (minutes later: rates shown as published that the
    owner had said not to stand behind); stating it again publishes it again."""
    client = recording_client
    tenant, _, _ = stated_model(client, redis_url, 7)
    append_plays(redis_url, 40_000, seed=0, against_clicks=False)
    assert _request_estimate(client, tenant, redis_url)["estimate"]["status"] == "published"

    def after_statement(stated: bool) -> tuple[object, ...]:
        assert client.put("/v1/models/m1/noise", headers=tenant,
                          json={"one_right_label": stated}).status_code == 200
        run_nrest(redis_url)  # the jobs role's next poll, no POST .../noise/estimate
        noise = client.get("/v1/models/m1/noise", headers=tenant).json()
        return (noise["status"], noise["reason"], noise["withdrawn"],
                noise["calibration_unreliable"])

    assert after_statement(False) == ("insufficient_data", "one_right_label_unstated",
                                      "one_right_label_unstated", True)
    assert after_statement(True) == ("published", "", None, False)


def test_a_rank_model_withdraws_its_rates_and_keeps_its_examination(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """A rank model's per-slot estimate published whole on binary relevance (the anchors
    hold), then refused ``anchor_not_flat`` on graded relevance (``graded`` 0.7: relevance
    still rising within the top band): its rates and per-slot correction stay in use,
    flagged; its ``position_bias`` keeps the published ``theta``, whose gate does not rest
    on flat anchor bands."""
    assert client.post("/v1/models", headers=tenant, json={
        "model_id": "m1", "task": "rank", "n_features": 3, "n_action_features": 2,
        "slots": 3, "seed": 0}).status_code == 201
    append_rows(redis_url, 40_000, seed=0)
    assert _request_estimate(client, tenant, redis_url)["estimate"]["status"] == "published"
    before = client.get("/v1/models/m1", headers=tenant).json()
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["withdrawn"], noise["calibration_unreliable"]) == (
        "published", None, False), noise

    append_rows(redis_url, 30_000, seed=1, graded=0.7)  # the whole buffer
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["status"], estimate["reason"]) == ("insufficient_data", "anchor_not_flat")
    withdrawn = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (withdrawn["status"], withdrawn["source"], withdrawn["withdrawn"],
            withdrawn["calibration_unreliable"]) == (
        "insufficient_data", "estimated", "anchor_not_flat", True), withdrawn
    assert (withdrawn["rho0"], withdrawn["rho1"]) == (noise["rho0"], noise["rho1"])
    # the rows in force, their rates no longer published (theta's gate holds still)
    assert [{**row, "published": None} for row in withdrawn["slots"]] == [
        {**row, "published": None} for row in noise["slots"]]
    assert all(row["published"] == {"theta": True, "rho0": True, "rho1": True}
               for row in noise["slots"])
    assert all(row["published"] == {"theta": True, "rho0": False, "rho1": False}
               for row in withdrawn["slots"]), withdrawn["slots"]
    model = client.get("/v1/models/m1", headers=tenant).json()
    assert model["position_bias"] == before["position_bias"]
    assert model["position_bias"]["source"] == "estimated"
    rng = np.random.default_rng(0)
    ranked = client.post("/v1/models/m1/rank", headers=tenant, json={
        "features": [1.0, 0.2, -0.3],
        "actions": [{"id": f"i{i}", "features": rng.standard_normal(2).tolist()}
                    for i in range(6)]})
    assert ranked.status_code == 200 and ranked.json()["calibration_unreliable"] is True
