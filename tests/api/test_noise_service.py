"""The anchor estimator through the service: 10 arms, 20 features, rates (0.2, 0.3), 20,000
events in batches of 500 with a sync after each, the jobs role run between batches; and a
requested estimate, which takes the periodic refresh's path and publish rule."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from app.store import Store
from app.worker_settings import WorkerSettings
from tests.api.conftest import TestClient, new_model, predict_all
from workers.worker import Worker

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

K, D, N, BATCH, RATES = 10, 20, 20_000, 500, (0.2, 0.3)


def run_nrest(redis_url: str) -> None:
    """One jobs role drained once (it takes the queued jobs, refreshes due estimates)."""
    async def run() -> None:
        store = Store.from_url(redis_url)
        await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n",
                                           nrest_threads=True)).drain()
        await store.close()
    asyncio.run(run())


def answer_with_noisy_clicks(client: TestClient, tenant: dict[str, str], redis_url: str,
                             X: np.ndarray, W: np.ndarray, rates: tuple[float, float],
                             rng: np.random.Generator) -> tuple[list[dict[str, Any]], list[int],
                                                                list[int]]:
    """Decide ``X`` on model ``m1``, click each decision through the click noise ``rates``
    (right when the label is ``argmax W x``), post the clicks, wait for the trainer and run
    the jobs role once; the decisions, whether each was right, and the clicks."""
    preds = predict_all(client, tenant, X)
    hits = [int(p["label"] == y) for p, y in zip(preds, np.argmax(X @ W.T, axis=1),
                                                  strict=True)]
    clicks = [bool(rng.random() > rates[1]) if c else bool(rng.random() < rates[0])
              for c in hits]
    events = [{"event_id": p["event_id"], "click": f}
              for p, f in zip(preds, clicks, strict=True)]
    assert client.post("/v1/models/m1/feedback", json={"events": events},
                       headers=tenant).status_code in (200, 202)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    run_nrest(redis_url)
    return preds, hits, clicks


def _serve_jobs(redis_url: str, stop: threading.Event) -> None:
    """The jobs role, drained again and again until ``stop`` (it takes queued jobs)."""
    while not stop.is_set():
        run_nrest(redis_url)
        stop.wait(0.02)


def _request_estimate(client: TestClient, tenant: dict[str, str],
                      redis_url: str) -> dict[str, Any]:
    """``POST .../noise/estimate?wait=true`` answered by an jobs role in a thread."""
    stop = threading.Event()
    role = threading.Thread(target=_serve_jobs, args=(redis_url, stop))
    role.start()
    try:
        r = client.post("/v1/models/m1/noise/estimate", params={"wait": "true", "timeout": 60},
                        headers=tenant)
    finally:
        stop.set()
        role.join()
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _play(client: TestClient, tenant: dict[str, str], rng: np.random.Generator,
          W: np.ndarray, rates: tuple[float, float], n: int) -> list[int]:
    """``n`` decisions of model m1 and their noisy clicks (batches of ``BATCH``, synced);
    returns whether each played arm was right."""
    right: list[int] = []
    for _ in range(n // BATCH):
        X = rng.standard_normal((BATCH, W.shape[1]))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        preds = predict_all(client, tenant, X)
        hits = [int(p["label"] == y) for p, y in zip(preds, np.argmax(X @ W.T, axis=1),
                                                      strict=True)]
        right += hits
        events = [{"event_id": p["event_id"],
                   "click": bool(rng.random() > rates[1]) if c else bool(rng.random() < rates[0])}
                  for p, c in zip(preds, hits, strict=True)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=tenant).status_code in (200, 202)
        assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    return right


def test_a_requested_estimate_with_too_few_events_publishes_nothing(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    # 3,000 events at rates (0.25, 0.15): NREst, run by request whatever the estimator,
    # once published (0.337, 0.563) here with no interval
    rng = np.random.default_rng(3)
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    _play(client, tenant, rng, rng.standard_normal((K, D)), (0.25, 0.15), 3_000)
    body = _request_estimate(client, tenant, redis_url)
    estimate = body["estimate"]
    assert (estimate["estimator"], estimate["status"]) == ("anchor", "insufficient_data")
    assert estimate["reason"] and estimate["n_events"] == 3_000
    assert estimate["rho0"] is None and estimate["interval"] is None
    assert estimate["n_top"] is not None and estimate["n_explored"] is not None
    assert (body["status"], body["source"], body["rho0"], body["rho1"]) == (
        "insufficient_data", "initial", 0.0, 0.0)
    # every route still says so
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["source"], noise["interval"]) == (
        "insufficient_data", "initial", None)
    assert noise["reason"] == estimate["reason"] and noise["history"] == []
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"][
        "calibration_unreliable"] is True
    pred = client.post("/v1/models/m1/predict", json={"features": [0.1] * D}, headers=tenant)
    assert pred.json()["calibration_unreliable"] is True


def test_a_requested_estimate_of_a_fixed_estimator_is_refused(
        idle_client: TestClient, tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant, algorithm="linucb_diag")
    assert idle_client.put("/v1/models/m1/noise", json={"estimator": "fixed"},
                           headers=tenant).status_code == 200
    r = idle_client.post("/v1/models/m1/noise/estimate", headers=tenant)
    assert r.status_code == 422, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (
        "estimate_unavailable", "estimator")


def test_rates_and_debiased_reward_within_tolerance_and_no_number_before(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    rng = np.random.default_rng(7)
    W = rng.standard_normal((K, D))
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    # one right label per input (argmax W x), as its owner states
    assert client.put("/v1/models/m1/noise", headers=tenant,
                      json={"one_right_label": True}).json()["one_right_label"] is True
    right: list[int] = []
    for b in range(N // BATCH):
        X = rng.standard_normal((BATCH, D))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        preds, hits, _ = answer_with_noisy_clicks(client, tenant, redis_url, X, W, RATES, rng)
        assert all(0.0 <= p["expected_reward"] <= 1.0 for p in preds)
        right += hits
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
    # a requested estimate is published by the same rule, with its interval
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["estimator"], estimate["status"]) == ("anchor", "published")
    for rate, truth in zip(("rho0", "rho1"), RATES, strict=True):
        low, high = estimate["interval"][rate]
        assert high - low <= 0.1 and abs(estimate[rate] - truth) < 0.05, estimate
