"""Model routes: create with validation, list, get, delete, reset, snapshot, sync."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from tests.api.conftest import TestClient, new_model


def test_create_model_fills_defaults(client: TestClient, tenant: dict[str, str]) -> None:
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": 4,
                                        "n_classes": 3}, headers=tenant)
    assert r.status_code == 201, r.text
    m = r.json()
    # the label task's default learner is the one that measures best (docs/results/ridge.md)
    assert m["algorithm"] == "linucb_diag" and m["params"]["uniform_share"] == 0.05
    assert m["feedback"] == {"wait_seconds": 86400, "on_timeout": "drop"}
    assert m["stats"] == {"predictions": 0, "feedback_accepted": 0, "events_applied": 0,
                          "events_expired": 0, "events_dead_lettered": 0,
                          "dead_letters_dropped": 0, "debiased_reward": None,
                          "calibration_unreliable": False}
    assert m["noise"]["source"] == "initial" and m["version"] == 1
    assert set(m) >= {"model_id", "task", "algorithm", "n_features", "n_classes", "params",
                      "feedback", "created_at", "version", "stats"}


@pytest.mark.parametrize(("patch", "field"), [
    ({"task": "nope"}, "task"),
    ({"algorithm": "mc_dbf"}, "algorithm"),
    ({"params": {"uniform_share": 2.0}}, "params.uniform_share"),
    ({"algorithm": "rcine", "params": {"gamma": 2.0}}, "params.gamma"),
    ({"params": {"bogus": 1}}, "params.bogus"),
    ({"n_features": 0}, "n_features"),
    ({"n_features": 1_000_001}, "n_features"),
    ({"n_classes": 1}, "n_classes"),
    ({"n_classes": 10_001}, "n_classes"),
    ({"model_id": "-bad"}, "model_id"),
    ({"feedback": {"wait_seconds": 0}}, "feedback.wait_seconds"),
    ({"feedback": {"on_timeout": "maybe"}}, "feedback.on_timeout"),
    ({"task": "label_set", "algorithm": "mc_dbf", "params": {"m": 3}}, "params.m"),
    ({"algorithm": "perceptron", "feedback": {"on_timeout": "no_click"}}, "feedback.on_timeout"),
])
def test_create_model_invalid_422_names_field(client: TestClient, tenant: dict[str, str],
                                              patch: dict, field: str) -> None:
    body = {"model_id": "m1", "task": "label", "n_features": 4, "n_classes": 3, **patch}
    r = client.post("/v1/models", json=body, headers=tenant)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.json()


def test_create_model_duplicate_409(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": 4,
                                        "n_classes": 3}, headers=tenant)
    assert r.status_code == 409 and r.json()["error"]["code"] == "model_exists"


def test_list_get_delete(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    new_model(client, tenant, model_id="m2", task="label_set", algorithm="mc_dbf",
              params={"m": 2})
    ids = [m["model_id"] for m in client.get("/v1/models", headers=tenant).json()["models"]]
    assert ids == ["m1", "m2"]
    assert client.get("/v1/models/m2", headers=tenant).json()["params"]["m"] == 2
    assert client.delete("/v1/models/m1", headers=tenant).status_code == 204
    r = client.get("/v1/models/m1", headers=tenant)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    assert client.delete("/v1/models/m1", headers=tenant).status_code == 404


def test_model_routes_need_auth(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = client.get("/v1/models/m1")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    r = client.get("/v1/models/m1", headers={"Authorization": "Basic abc"})
    assert r.json()["error"]["code"] == "unauthenticated"
    r = client.get("/v1/models/m1", headers={"Authorization": "Bearer nl.acme.0.x"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def _train_one(client: TestClient, auth: dict[str, str]) -> None:
    p = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]}, headers=auth).json()
    assert client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": 1},
                       headers=auth).status_code == 202
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200


def test_snapshot_export_import_and_reset(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    _train_one(client, tenant)
    snap = client.get("/v1/models/m1/snapshot", headers=tenant).json()
    assert snap["version"] == 2 and snap["model"]["algorithm"] == "rcnbf"
    W = np.load(io.BytesIO(base64.b64decode(snap["state"]["W_"]["data_b64"])))
    assert W.shape == (3, 4) and np.abs(W).sum() > 0
    r = client.post("/v1/models/m1/reset", headers=tenant)
    assert r.status_code == 200 and r.json()["version"] == 3
    W0 = np.load(io.BytesIO(base64.b64decode(
        client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"]["W_"]["data_b64"])))
    assert np.abs(W0).sum() == 0
    r = client.put("/v1/models/m1/snapshot", json=snap, headers=tenant)
    assert r.status_code == 200 and r.json()["version"] == 4
    back = client.get("/v1/models/m1/snapshot", headers=tenant).json()
    assert back["state"]["W_"]["data_b64"] == snap["state"]["W_"]["data_b64"]


def test_snapshot_import_mismatch_422(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    snap = client.get("/v1/models/m1/snapshot", headers=tenant).json()
    bad = dict(snap, model=dict(snap["model"], n_features=5))
    r = client.put("/v1/models/m1/snapshot", json=bad, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "model.n_features"
    buf = io.BytesIO()
    np.save(buf, np.zeros((2, 2)))
    wrong = {"dtype": "<f8", "shape": [2, 2], "data_b64": base64.b64encode(buf.getvalue()).decode()}
    r = client.put("/v1/models/m1/snapshot", json={"state": dict(snap["state"], W_=wrong)},
                   headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "state.W_"
    r = client.put("/v1/models/m1/snapshot",
                   json={"state": dict(snap["state"], W_=dict(wrong, data_b64="!!"))},
                   headers=tenant)
    assert r.status_code == 422


def test_sync_timeout_504_without_trainer(idle_client: TestClient) -> None:
    from tests.api.conftest import new_tenant

    auth = new_tenant(idle_client)
    new_model(idle_client, auth)
    p = idle_client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                         headers=auth).json()
    idle_client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": 0},
                     headers=auth)
    r = idle_client.post("/v1/models/m1/sync?timeout=0.2", headers=auth)
    assert r.status_code == 504 and r.json()["error"]["code"] == "sync_timeout"
