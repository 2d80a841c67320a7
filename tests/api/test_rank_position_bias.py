"""A rank model's position bias, wherever it is shown (the model, its series), is the per-slot
estimate in force: flagged ``insufficient_data`` until one is published, never the learner's
own score-band estimate; each publish's per-slot values and intervals reach the series."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from app.learners.build import build_learner
from app.sim.rank import RankSimulator
from app.store import ModelKeys, Store
from tests.api.conftest import new_tenant, post_feedback

pytestmark = pytest.mark.slow

#: A published per-slot estimate (the shape ``GET .../noise`` shows as ``slots``).
SLOTS = [{"slot": k, "theta": theta, "rho0": rho0, "rho1": 0.2,
          "interval": {"theta": [theta - 0.02 * k, theta + 0.02 * k],
                       "rho0": [rho0 - 0.01, rho0 + 0.01], "rho1": [0.17, 0.23]}}
         for k, (theta, rho0) in enumerate([(1.0, 0.1), (0.62, 0.07), (0.33, 0.05)])]


@pytest.fixture
def client(recording_client: TestClient) -> TestClient:
    """The trainer records a series point per batch."""
    return recording_client


def feed_rounds(client: TestClient, auth: dict[str, str], sim: RankSimulator,
                rounds: int, batch: int = 200) -> None:
    """``rounds`` batches of rankings of model ``r`` answered by the simulator, each synced."""
    for _ in range(rounds):
        requests = [sim.request() for _ in range(batch)]
        r = client.post("/v1/models/r/rank", headers=auth, json={"requests": [
            {"features": q.x.tolist(), "actions": [{"id": str(i), "features": a.tolist()}
                                                   for i, a in zip(q.ids, q.actions,
                                                                   strict=True)]}
            for q in requests]})
        assert r.status_code == 200, r.text
        events = []
        for q, result in zip(requests, r.json()["results"], strict=True):
            row = {str(i): k for k, i in enumerate(q.ids)}
            shown = [x["id"] for x in result["ranking"]]
            clicks = sim.clicks(q, np.array([row[i] for i in shown]))
            events.append({"event_id": result["event_id"],
                           "clicks": [i for i, c in zip(shown, clicks, strict=True) if c]})
        assert post_feedback(client, auth, {"events": events}, model="r").status_code == 202
        assert client.post("/v1/models/r/sync", headers=auth).status_code == 200


def last_point(client: TestClient, auth: dict[str, str], applied: int) -> dict[str, Any]:
    """The series point at ``applied`` events (written by the trainer's next pass)."""
    deadline = time.monotonic() + 30
    while True:
        points = client.get("/v1/models/r/series?limit=1", headers=auth).json()["points"]
        if points and points[-1]["events_applied"] == applied:
            return dict(points[-1])
        assert time.monotonic() < deadline, points
        time.sleep(0.05)


def in_store(redis_url: str, work: Any) -> Any:
    """``await work(store, keys of model r)`` on a store of its own."""
    async def run() -> Any:
        store = Store.from_url(redis_url)
        try:
            return await work(store, ModelKeys("acme", "r"))
        finally:
            await store.close()
    return asyncio.run(run())


def test_position_bias_is_the_per_slot_estimate_in_the_model_and_its_series(
        client: TestClient, redis_url: str) -> None:
    auth = new_tenant(client, "acme")
    sim = RankSimulator(seed=0)
    assert client.post("/v1/models", headers=auth, json={
        "model_id": "r", "task": "rank", "n_features": sim.n_features,
        "n_action_features": sim.n_action_features, "slots": sim.slots,
        "seed": 0}).status_code == 201
    feed_rounds(client, auth, sim, rounds=3)
    point = last_point(client, auth, 600)

    async def own_estimate(store: Store, mk: ModelKeys) -> str:
        snap, config = await store.snapshots.load(mk), (await store.models.record(
            "acme", "r")).config  # type: ignore[union-attr]
        return build_learner(config, snap.state).position_bias_estimate()[1]  # type: ignore
    # the learner's score-band estimate covers every slot by now: the old source showed it
    assert in_store(redis_url, own_estimate) == "estimated"
    model = client.get("/v1/models/r", headers=auth).json()
    assert model["position_bias"] == {"values": [1.0, 1.0, 1.0], "source": "insufficient_data",
                                      "calibration_unreliable": True}
    assert (point["position_bias"], point["position_bias_source"]) == (
        [1.0, 1.0, 1.0], "insufficient_data")
    assert (point["slots"], point["slots_status"], point["slots_reason"]) == (
        None, "insufficient_data", "too_few_events")

    async def publish(store: Store, mk: ModelKeys) -> None:
        await store.noise.put(mk, 0.1, 0.2, source="estimated", n_samples=600, slots=SLOTS)
        await store.anchors.record(mk, {"status": "published", "reason": "", "slots": SLOTS})
    in_store(redis_url, publish)
    feed_rounds(client, auth, sim, rounds=2)
    last_point(client, auth, 1000)
    after = [p for p in client.get("/v1/models/r/series", headers=auth).json()["points"]
             if p["events_applied"] > 600]
    thetas = [s["theta"] for s in SLOTS]
    model = client.get("/v1/models/r", headers=auth).json()
    assert model["position_bias"] == {"values": thetas, "source": "estimated",
                                      "calibration_unreliable": False}
    noise = client.get("/v1/models/r/noise", headers=auth).json()
    # the publish once, with its intervals, on the first point after it
    # as stored, flagged published whole, with each interval's width
    assert after[0]["slots"] == noise["slots"]
    assert [{k: row[k] for k in SLOTS[0]} for row in noise["slots"]] == SLOTS
    for row in noise["slots"]:
        assert (row["published"], row["too_wide"]) == (
            {"theta": True, "rho0": True, "rho1": True}, [])
        assert row["widths"]["rho1"] == pytest.approx(0.06)
    assert len(after) >= 2 and all(p["slots"] is None for p in after[1:])
    for p in after:
        assert (p["position_bias"], p["position_bias_source"]) == (thetas, "estimated")
        assert (p["slots_status"], p["slots_reason"]) == ("published", "")
