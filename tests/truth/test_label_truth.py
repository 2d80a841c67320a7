"""The label task at default settings against a stream whose truth is known.

A model created with nothing but its sizes (the default learner, the default
``anchor`` estimator) learns from a simulated stream through the real
service: 10 arms, 20 features, the right arm ``argmax W x``, clicks flipped at
rates (0.15, 0.25), batches of 500 events with a ``sync`` after each and the
nrest role run between batches.  After every batch every noise number the API
shows is checked against the truth: inside its stated interval, or flagged
(``insufficient_data``, ``calibration_unreliable``).  A decision's
``expected_reward`` has no stated interval and is not checked here.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np

from app.store import Store
from tests.api.conftest import TestClient, predict_all
from workers.settings import WorkerSettings
from workers.worker import Worker

K, D, N, BATCH, RATES, SEED = 10, 20, 15_000, 500, (0.15, 0.25), 11
#: Normal quantile of the sampling tolerance on a mean click (two-sided 99.7%).
Z = 3.0


def _run_nrest(redis_url: str) -> None:
    async def run() -> None:
        store = Store.from_url(redis_url)
        await Worker(store, WorkerSettings(roles=("nrest",), worker_id="n",
                                           nrest_threads=True)).drain()
        await store.close()
    asyncio.run(run())


def debiased_tolerance(clicks: list[int], interval: dict[str, Any]) -> float:
    """How far ``debiased_reward`` may be from the true click rate of the played arms:
    the sampling error of the mean click, plus the published intervals carried through
    ``g = (f - rho0) / (1 - rho0 - rho1)`` at their worst corner (first order)."""
    n, f = len(clicks), float(np.mean(clicks))
    r0, r1 = RATES
    beta = 1.0 - r0 - r1
    hw0 = (interval["rho0"][1] - interval["rho0"][0]) / 2
    hw1 = (interval["rho1"][1] - interval["rho1"][0]) / 2
    sampling = Z * math.sqrt(f * (1 - f) / n) / beta
    return sampling + (abs(f - 1 + r1) * hw0 + abs(f - r0) * hw1) / beta**2


def test_every_noise_number_is_inside_its_interval_or_flagged(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    rng = np.random.default_rng(SEED)
    W = rng.standard_normal((K, D))
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": D,
                                        "n_classes": K}, headers=tenant)
    assert r.status_code == 201, r.text
    right: list[int] = []
    clicks: list[int] = []
    published = covered = 0
    for _ in range(N // BATCH):
        X = rng.standard_normal((BATCH, D))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        preds = predict_all(client, tenant, X)
        hits = [int(p["label"] == y) for p, y in zip(preds, np.argmax(X @ W.T, axis=1),
                                                      strict=True)]
        batch_clicks = [int(rng.random() > RATES[1]) if c else int(rng.random() < RATES[0])
                        for c in hits]
        events = [{"event_id": p["event_id"], "click": f}
                  for p, f in zip(preds, batch_clicks, strict=True)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=tenant).status_code in (200, 202)
        assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
        _run_nrest(redis_url)
        flagged = {bool(p["calibration_unreliable"]) for p in preds}
        right += hits
        clicks += batch_clicks
        noise = client.get("/v1/models/m1/noise", headers=tenant).json()
        stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
        if noise["status"] == "insufficient_data":
            # no estimated number anywhere: the initial rates, flagged everywhere
            assert (noise["source"], noise["rho0"], noise["rho1"]) == ("initial", 0.0, 0.0)
            assert noise["reason"] and noise["history"] == []
            assert noise["interval"] is None or noise["interval"]["rho0"] is None
            assert stats["calibration_unreliable"] is True
            assert flagged == {True}
            continue
        assert (noise["status"], noise["source"]) == ("published", "estimated"), noise
        published += 1
        interval = noise["interval"]
        covered += all(interval[rate][0] <= truth <= interval[rate][1]
                       for rate, truth in zip(("rho0", "rho1"), RATES, strict=True))
        for rate in ("rho0", "rho1"):
            assert interval[rate][1] - interval[rate][0] <= noise["max_width"]
        assert stats["calibration_unreliable"] is False
        assert abs(stats["debiased_reward"] - np.mean(right)) <= debiased_tolerance(
            clicks, interval), (stats["debiased_reward"], np.mean(right))
    assert published >= 2, "the estimate was never published"
    # both intervals hold the truth together in at least 90% of cases (Bonferroni)
    assert covered >= published - 1, (covered, published)
