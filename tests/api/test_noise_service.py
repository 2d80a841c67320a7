"""The anchor estimator through the service: 10 arms, 20 features, rates (0.2, 0.3), 20,000
events in batches of 500 with a sync after each, the nrest role run between batches."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.store import Store
from tests.api.conftest import TestClient, new_model, predict_all
from workers.settings import WorkerSettings
from workers.worker import Worker

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

K, D, N, BATCH, RATES = 10, 20, 20_000, 500, (0.2, 0.3)


def _run_nrest(redis_url: str) -> None:
    async def run() -> None:
        store = Store.from_url(redis_url)
        await Worker(store, WorkerSettings(roles=("nrest",), worker_id="n",
                                           nrest_threads=True)).drain()
        await store.close()
    asyncio.run(run())


def test_rates_and_debiased_reward_within_tolerance_and_no_number_before(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    rng = np.random.default_rng(7)
    W = rng.standard_normal((K, D))
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    right: list[int] = []
    for b in range(N // BATCH):
        X = rng.standard_normal((BATCH, D))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        preds = predict_all(client, tenant, X)
        assert all(0.0 <= p["expected_reward"] <= 1.0 for p in preds)
        hits = [int(p["label"] == y) for p, y in zip(preds, np.argmax(X @ W.T, axis=1),
                                                      strict=True)]
        right += hits
        clicks = [int(rng.random() > RATES[1]) if c else int(rng.random() < RATES[0])
                  for c in hits]
        events = [{"event_id": p["event_id"], "click": f}
                  for p, f in zip(preds, clicks, strict=True)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=tenant).status_code in (200, 202)
        assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
        _run_nrest(redis_url)
        noise = client.get("/v1/models/m1/noise", headers=tenant).json()
        if b == 4:  # 2,500 events: too few, and the initial rates stay
            assert noise["status"] == "insufficient_data" and noise["reason"]
            assert (noise["rho0"], noise["rho1"], noise["source"]) == (0.0, 0.0, "initial")
            early = client.get("/v1/models/m1", headers=tenant).json()["stats"]
            assert early["calibration_unreliable"] is True
    assert noise["status"] == "published" and noise["source"] == "estimated"
    for rate, truth in zip(("rho0", "rho1"), RATES, strict=True):
        assert abs(noise[rate] - truth) < 0.05, noise
        low, high = noise["interval"][rate]
        assert high - low <= 0.1
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    # the batches applied before the first estimate are corrected with it too
    assert abs(stats["debiased_reward"] - np.mean(right)) < 0.03
    assert stats["calibration_unreliable"] is False
