"""Model routes: create with validation, list, get, delete, reset, snapshot, sync."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from tests.api.conftest import ADMIN, TestClient, new_model


def test_create_model_fills_defaults(client: TestClient, tenant: dict[str, str]) -> None:
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": 4,
                                        "n_classes": 3}, headers=tenant)
    assert r.status_code == 201, r.text
    m = r.json()
    # the label task's default learner is the one that measures best (docs/results/ridge.md)
    assert m["algorithm"] == "linucb_diag" and m["params"]["uniform_share"] == 0.05
    assert m["feedback"] == {"wait_seconds": 86400, "on_timeout": "drop",
                             "aggregation": "earliest"}
    assert m["stats"] == {"predictions": 0, "feedback_accepted": 0, "events_applied": 0,
                          "events_expired": 0, "events_dead_lettered": 0,
                          "dead_letters_dropped": 0, "awaiting_feedback": 0, "backlog": 0,
                          "debiased_reward": None, "calibration_unreliable": True,
                          "trainer_error": None}
    assert m["noise"]["source"] == "initial" and m["version"] == 1
    assert set(m) >= {"model_id", "task", "algorithm", "n_features", "n_classes", "params",
                      "feedback", "created_at", "version", "stats"}


@pytest.mark.parametrize(("patch", "field"), [
    ({"task": "nope"}, "task"),
    ({"algorithm": "mc_dbf"}, "algorithm"),
    ({"algorithm": ""}, "algorithm"),
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
    assert client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": True},
                       headers=auth).status_code == 202
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200


@pytest.mark.slow
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
    idle_client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": False},
                     headers=auth)
    r = idle_client.post("/v1/models/m1/sync?timeout=0.2", headers=auth)
    assert r.status_code == 504 and r.json()["error"]["code"] == "sync_timeout"


def _serve_five_answer_three(client: TestClient, auth: dict[str, str]) -> None:
    preds = client.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0]] * 5},
                        headers=auth).json()["predictions"]
    events = [{"event_id": p["event_id"], "click": True} for p in preds[:3]]
    assert client.post("/v1/models/m1/feedback", json={"events": events},
                       headers=auth).json()["accepted"] == 3


def test_stats_count_what_awaits_feedback_and_what_awaits_the_trainer_now(
        idle_client: TestClient, redis_url: str) -> None:
    """Live counts, as sync sees them: nothing left to apply once sync returns."""
    from tests.api.conftest import make_client, new_tenant

    auth = new_tenant(idle_client)
    new_model(idle_client, auth)
    _serve_five_answer_three(idle_client, auth)
    stats = idle_client.get("/v1/models/m1", headers=auth).json()["stats"]
    assert (stats["awaiting_feedback"], stats["backlog"]) == (2, 3)
    with make_client(redis_url) as client:  # the same Redis, now with a trainer
        _serve_five_answer_three(client, auth)
        assert client.post("/v1/models/m1/sync", headers=auth).json()["pending"] == 0
        (listed,) = client.get("/v1/models", headers=auth).json()["models"]
    assert listed["stats"]["events_applied"] == 6
    assert (listed["stats"]["awaiting_feedback"], listed["stats"]["backlog"]) == (4, 0)


def _model_series(client: TestClient, model_id: str) -> list[str]:
    return [line for line in client.get("/metrics", headers=ADMIN).text.splitlines()
            if f'model="{model_id}"' in line]


def _model_keys(redis_url: str, model_id: str) -> list[bytes]:
    import redis

    with redis.Redis.from_url(redis_url) as r:
        return [k for k in r.keys("*") if f":{model_id}}}".encode() in k]


@pytest.mark.parametrize("route", ["model", "tenant"])
@pytest.mark.slow
def test_delete_removes_answered_contexts_and_open_feedback_series(
        client: TestClient, tenant: dict[str, str], redis_url: str, route: str) -> None:
    """A delete leaves no key of the model (answered decisions' context tombstones included)
    and no metric series of it (the open-feedback outcome included)."""
    from tests.api.conftest import ADMIN, post_feedback, predict_all

    new_model(client, tenant)
    client.post("/v1/models", headers=tenant, json={
        "model_id": "reg", "task": "regression", "algorithm": "ors", "n_features": 3,
        "seed": 0, "label_budget": {"budget": 2.0, "strategy": "const"}})
    X = np.eye(4)[[0, 1, 2, 3, 0, 1]]
    answered = predict_all(client, tenant, X)
    events = [{"event_id": p["event_id"], "click": True} for p in answered]
    assert post_feedback(client, tenant, {"events": events}).json()["accepted"] == 6
    opened = predict_all(client, tenant, np.ones((4, 3)), model="reg")
    doc = post_feedback(client, tenant, {"events": [
        {"event_id": p["event_id"], "values": [0.5]} for p in opened]}, model="reg").json()
    assert doc["accepted"] == 4 and doc["open"]
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    assert len([k for k in _model_keys(redis_url, "m1") if b":ctx:" in k]) == 6
    assert any('outcome="open"' in line for line in _model_series(client, "reg"))
    for model_id in ("m1", "reg"):
        if route == "model":
            assert client.delete(f"/v1/models/{model_id}", headers=tenant).status_code == 204
    if route == "tenant":
        assert client.delete("/v1/admin/tenants/acme", headers=ADMIN).status_code == 204
    for model_id in ("m1", "reg"):
        assert _model_keys(redis_url, model_id) == []
        assert _model_series(client, model_id) == []


def test_every_route_gives_a_model_the_same_representation(
        client: TestClient, tenant: dict[str, str]) -> None:
    """The lists (the tenant's and the admin's) give each model field by field what
    ``GET /v1/models/{id}`` gives: its drift report and position bias included."""
    new_model(client, tenant)
    r = client.post("/v1/models", headers=tenant, json={
        "model_id": "feed", "task": "rank", "n_features": 2, "n_action_features": 2,
        "slots": 2, "seed": 0})
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(0)
    ranked = client.post("/v1/models/feed/rank", headers=tenant, json={"requests": [
        {"features": rng.standard_normal(2).tolist(),
         "actions": [{"id": f"i{k}", "features": rng.standard_normal(2).tolist()}
                     for k in range(3)]} for _ in range(40)]}).json()["results"]
    preds = client.post("/v1/models/m1/predict", headers=tenant,
                        json={"instances": rng.standard_normal((40, 4)).tolist()}
                        ).json()["predictions"]
    for model, events in (
            ("feed", [{"event_id": x["event_id"], "clicks": [x["ranking"][0]["id"]]}
                      for x in ranked]),
            ("m1", [{"event_id": p["event_id"], "click": True} for p in preds])):
        r = client.post(f"/v1/models/{model}/feedback", headers=tenant, json={"events": events})
        assert r.status_code == 202, r.text
        assert client.post(f"/v1/models/{model}/sync", headers=tenant).status_code == 200
    single = {m: client.get(f"/v1/models/{m}", headers=tenant).json() for m in ("feed", "m1")}
    assert single["m1"]["drift"]["events"] == 40 and single["feed"]["position_bias"] is not None
    for listed in (client.get("/v1/models", headers=tenant).json()["models"],
                   client.get("/v1/admin/tenants/acme/models", headers=ADMIN).json()["models"]):
        assert [m["model_id"] for m in listed] == ["feed", "m1"]
        for model in listed:
            one = single[model["model_id"]]
            assert set(model) == set(one)
            for field in one:
                assert model[field] == one[field], (model["model_id"], field)
