"""``drift`` in ``GET /v1/models/{id}``: the trainer's detector, as the API shows it."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.testclient import TestClient

from tests.api.conftest import new_model, new_tenant, predict_all


@pytest.fixture
def client(recording_client: TestClient) -> TestClient:
    """The trainer records a series point per batch here too."""
    return recording_client


def _answer(client: TestClient, auth: dict[str, str], n: int, rate: float,
            rng: np.random.Generator) -> None:
    preds = predict_all(client, auth, rng.standard_normal((n, 4)))
    events = [{"event_id": p["event_id"], "click": bool(rng.random() < rate)} for p in preds]
    assert client.post("/v1/models/m1/feedback", json={"events": events},
                       headers=auth).json()["accepted"] == n
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200


@pytest.mark.slow
def test_model_shows_the_drift_its_trainer_detected(client: TestClient) -> None:
    auth = new_tenant(client, "acme")
    drift = new_model(client, auth)["drift"]  # no event applied yet
    assert (drift["action"], drift["status"], drift["events"]) == ("recover", "warming_up", 0)
    rng = np.random.default_rng(0)
    _answer(client, auth, 600, 0.9, rng)
    drift = client.get("/v1/models/m1", headers=auth).json()["drift"]
    assert (drift["status"], drift["detections"], drift["events"]) == ("stable", 0, 600)
    assert drift["signal"] == "reward" and drift["method"] == "page_hinkley"
    assert drift["threshold"] == 150.0 and drift["detected_at"] is None
    _answer(client, auth, 600, 0.05, rng)
    drift = client.get("/v1/models/m1", headers=auth).json()["drift"]
    assert (drift["status"], drift["detections"]) == ("drift", 1)
    assert 600 < drift["detected_at_event"] <= 800 and drift["detected_at"] > 0


def test_put_drift_sets_the_action_and_refuses_another(client: TestClient) -> None:
    auth = new_tenant(client, "acme")
    created = client.post("/v1/models", headers=auth, json={
        "model_id": "m2", "task": "label", "n_features": 4, "n_classes": 3,
        "drift": {"action": "alert"}})
    assert created.status_code == 201 and created.json()["drift"]["action"] == "alert"
    r = client.put("/v1/models/m2/drift", json={"action": "none"}, headers=auth)
    assert r.status_code == 200, r.text
    assert (r.json()["drift"]["action"], r.json()["drift"]["status"]) == ("none", "off")
    assert client.get("/v1/models/m2", headers=auth).json()["drift"]["action"] == "none"
    r = client.put("/v1/models/m2/drift", json={"action": "retrain"}, headers=auth)
    assert r.status_code == 422 and r.json()["error"]["field"] == "action", r.text
    assert client.put("/v1/models/nope/drift", json={"action": "alert"},
                      headers=auth).status_code == 404


@pytest.mark.slow
def test_a_promotion_restarts_the_detector(client: TestClient) -> None:
    auth = new_tenant(client, "acme")
    new_model(client, auth, drift={"action": "alert"})
    r = client.post("/v1/models/m1/challengers", headers=auth,
                    json={"name": "c", "algorithm": "linucb_diag", "params": {}})
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(1)
    _answer(client, auth, 600, 0.9, rng)
    _answer(client, auth, 600, 0.05, rng)
    assert client.get("/v1/models/m1", headers=auth).json()["drift"]["status"] == "drift"
    r = client.post("/v1/models/m1/promote", json={"challenger": "c"}, headers=auth)
    assert r.status_code == 200, r.text
    _answer(client, auth, 300, 0.05, rng)
    drift = client.get("/v1/models/m1", headers=auth).json()["drift"]
    # the promoted model's low reward is its detector's new normal, not a drift
    assert (drift["status"], drift["detections"], drift["detected_at"]) == ("stable", 1, None)
