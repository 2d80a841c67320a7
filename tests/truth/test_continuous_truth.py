"""The ``continuous`` task's noisy purchases through the service: the correction pays, and
the rates it corrects by are shown as given, never as an estimate.

Two models at defaults price the same :data:`ROUNDS` customers of the pricing world
(:class:`app.sim.pricing.PricingWorld`), in batch predicts of :data:`BATCH`, each
batch's purchases flipped with ``rho0`` 0.05 and ``rho1`` 0.3 and sent as clicks worth
the price, learned before the next batch: one model is told the rates, the other is not.
The told one closes more of the gap between the uniform and the best price
(:data:`MARGIN`).  No estimator estimates the rates of this task (the anchor estimator
scores one click per played label; a price has no such label), so ``GET .../noise``
shows them as given (``fixed``, reason ``no_estimator``), the models' rewards and their
evaluations are flagged ``calibration_unreliable`` with that reason, and nothing is
published as an estimate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.sim.pricing import PricingWorld
from tests.api.conftest import TestClient, post_feedback, predict_all
from tests.api.test_evaluations import run_jobs

pytestmark = pytest.mark.slow

RHO0, RHO1 = 0.05, 0.3
ROUNDS, BATCH = 6_000, 200
#: The told model's online share of the gap minus the other's.  In process (the same
#: learners, 6,000 customers, batches of 200; `app.sim.pricing.play`, seeds 0-5) the
#: difference was 0.17, 0.38, 0.20, 0.24, 0.19, 0.23 (mean 0.24, sd 0.08): 0.05 is
#: 2.5 sd below the mean, a one-seed tolerance that still fails a correction that does
#: not pay.
MARGIN = 0.05


def _priced(client: TestClient, auth: dict[str, str], model: str, world: PricingWorld,
            X: np.ndarray, seed: int) -> np.ndarray:
    """The prices ``model`` played for the customers ``X``, each batch's noisy purchases
    learned before the next."""
    rng = np.random.default_rng(seed)
    prices = np.empty(len(X))
    for start in range(0, len(X), BATCH):
        rows = slice(start, start + BATCH)
        decided = predict_all(client, auth, X[rows], model=model)
        prices[rows] = [d["action"] for d in decided]
        bought = world.purchases(X[rows], prices[rows], rng, RHO0, RHO1)
        events = [{"event_id": d["event_id"], "click": bool(b), "click_value": d["action"]}
                  for d, b in zip(decided, bought, strict=True)]
        r = post_feedback(client, auth, {"events": events}, model=model)
        assert r.status_code == 202 and r.json()["accepted"] == len(events), r.text
        assert client.post(f"/v1/models/{model}/sync", headers=auth).json()["pending"] == 0
    return prices


def test_corrected_purchases_beat_uncorrected_and_rates_are_flagged(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    params: dict[str, dict[str, Any]] = {
        "told": {"action_range": [0, 10], "rho0": RHO0, "rho1": RHO1},
        "untold": {"action_range": [0, 10]}}
    for model, p in params.items():
        r = client.post("/v1/models", headers=tenant, json={
            "model_id": model, "task": "continuous", "n_features": 3, "seed": 0,
            "params": p})
        assert r.status_code == 201, r.text
    world = PricingWorld()
    X = world.customers(ROUNDS, np.random.default_rng(0))
    closed = {model: world.gap_closed(X, world.revenue(X, _priced(client, tenant, model,
                                                                   world, X, 1)))
              for model in params}
    assert closed["told"] - closed["untold"] >= MARGIN, closed

    for model, rates in (("told", (RHO0, RHO1)), ("untold", (0.0, 0.0))):
        noise = client.get(f"/v1/models/{model}/noise", headers=tenant).json()
        assert (noise["rho0"], noise["rho1"]) == rates
        assert (noise["source"], noise["status"], noise["reason"]) == (
            "initial", "fixed", "no_estimator")
        assert noise["interval"] is None and noise["history"] == []
        stats = client.get(f"/v1/models/{model}", headers=tenant).json()["stats"]
        assert stats["calibration_unreliable"] is True
    r = client.post("/v1/models/told/evaluations", headers=tenant, json={"policy": "logging"})
    assert r.status_code == 202, r.text
    assert run_jobs(redis_url) >= 1
    job = client.get(f"/v1/models/told/evaluations/{r.json()['job_id']}",
                     headers=tenant).json()
    assert job["status"] == "done", job
    assert (job["rates"], job["calibration_unreliable"], job["reason"]) == (
        "model", True, "no_estimator")
