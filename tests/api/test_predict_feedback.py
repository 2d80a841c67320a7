"""Predict (dense, sparse, named, batch, explore: false) and feedback (202/404/409/422)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction import FeatureHasher

from app.features import to_vector
from app.fields import NamedFeatures
from tests.api.conftest import TestClient, new_model


def _predict(client: TestClient, auth: dict[str, str], body: dict, model: str = "m1"):
    return client.post(f"/v1/models/{model}/predict", json=body, headers=auth)


def test_predict_dense_sparse_named(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    for features in ([0.5, 0, 1, 0], {"indices": [0, 2], "values": [0.5, 1.0]},
                     {"named": {"country=FR": 1, "age": 0.31}}):
        r = _predict(client, tenant, {"features": features})
        assert r.status_code == 200, r.text
        p = r.json()
        assert len(p["event_id"]) >= 16 and 0 <= p["label"] < 3
        assert 0 < p["probability"] <= 1 and p["model_version"] == 1


def test_named_features_match_sklearn_feature_hasher() -> None:
    named = {"country=FR": 1.0, "age": 0.31, "city": "Paris"}
    x = to_vector(NamedFeatures(named=named), 64)
    ref = FeatureHasher(n_features=64, input_type="dict").transform([named]).toarray()[0]
    np.testing.assert_allclose(x, ref)


def test_predict_batch_and_explore_false(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = _predict(client, tenant, {"instances": [[1, 0, 0, 0], {"indices": [1], "values": [2]}]})
    preds = r.json()["predictions"]
    assert len(preds) == 2 and len({p["event_id"] for p in preds}) == 2
    r = _predict(client, tenant, {"features": [1, 0, 0, 0], "explore": False})
    assert r.status_code == 200 and "event_id" not in r.json()
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["predictions"] == 3


@pytest.mark.slow
def test_predict_label_set(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, task="label_set", algorithm="mc_dbf", n_classes=5,
              params={"m": 2})
    p = _predict(client, tenant, {"features": [1, 0, 0, 0]}).json()
    assert len(p["labels"]) == 2 and len(set(p["labels"])) == 2
    assert len(p["greedy_labels"]) == 2 and 0 < p["probability"] <= 1
    r = client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": True},
                    headers=tenant)
    assert r.status_code == 202
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] == 2


@pytest.mark.parametrize(("body", "field"), [
    ({"features": [1, 0, 0]}, "features"),
    ({"features": [1, 0, 0, "x"]}, "features[3]"),
    ({"features": {"indices": [7], "values": [1.0]}}, "features.indices[0]"),
    ({"features": {"indices": [1, 2], "values": [1.0]}}, "features"),
    ({"instances": [[1, 0, 0, 0], [1, 0]]}, "instances[1]"),
    ({"instances": []}, "instances"),
    ({"features": [1, 0, 0, 0], "instances": [[1, 0, 0, 0]]}, None),
    ({"features": 3}, "features"),
    ({"features": [1, 0, 0, 0], "extra": 1}, "extra"),
])
def test_predict_invalid_422(client: TestClient, tenant: dict[str, str], body: dict,
                             field: str | None) -> None:
    new_model(client, tenant)
    r = _predict(client, tenant, body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.json()


def test_predict_non_finite_422(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    for raw in (b'{"features": [1, 0, NaN, 0]}', b'{"features": [1, 0, Infinity, 0]}',
                b'{"features": [1, 0, 1e999, 0]}', b'{"features": '):
        r = client.post("/v1/models/m1/predict", content=raw,
                        headers={**tenant, "Content-Type": "application/json"})
        assert r.status_code == 422, (raw, r.text)
        assert set(r.json()["error"]) == {"code", "message", "field"}


def test_predict_batch_over_1000_422(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = _predict(client, tenant, {"instances": [[0, 0, 0, 1]] * 1001})
    assert r.status_code == 422 and r.json()["error"]["field"] == "instances"


@pytest.mark.slow
def test_feedback_once_then_409_and_unknown_404(client: TestClient,
                                                tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    new_model(client, tenant, model_id="m2")
    eid = _predict(client, tenant, {"features": [1, 0, 0, 0]}).json()["event_id"]
    fb = {"event_id": eid, "click": False}
    r = client.post("/v1/models/m2/feedback", json=fb, headers=tenant)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_event"
    assert client.post("/v1/models/m1/feedback", json=fb, headers=tenant).status_code == 202
    r = client.post("/v1/models/m1/feedback", json=fb, headers=tenant)
    assert r.status_code == 409 and r.json()["error"]["code"] == "duplicate_feedback"
    r = client.post("/v1/models/m1/feedback", json={"event_id": "never-issued", "click": True},
                    headers=tenant)
    assert r.status_code == 404
    client.post("/v1/models/m1/sync", headers=tenant)
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 1


@pytest.mark.parametrize(("event", "field"), [
    ({"click": True}, "event_id"),
    ({"event_id": "x", "label": 1}, "label"),
    ({"event_id": "x"}, "click"),
    ({"event_id": "x", "click": "yes"}, "click"),
    ({"event_id": "x/../y", "click": True}, "event_id"),
])
def test_feedback_invalid_422(client: TestClient, tenant: dict[str, str], event: dict,
                              field: str) -> None:
    new_model(client, tenant)
    r = client.post("/v1/models/m1/feedback", json=event, headers=tenant)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_feedback_full_information_label(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="perceptron")
    eid = _predict(client, tenant, {"features": [1, 0, 0, 0]}).json()["event_id"]
    r = client.post("/v1/models/m1/feedback", json={"event_id": eid, "click": True},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "click"
    r = client.post("/v1/models/m1/feedback", json={"event_id": eid, "label": 3}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "label"
    r = client.post("/v1/models/m1/feedback", json={"event_id": eid, "label": 2}, headers=tenant)
    assert r.status_code == 202


@pytest.mark.slow
def test_feedback_batch_accepts_and_rejects_each(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    preds = _predict(client, tenant, {"instances": [[1, 0, 0, 0]] * 3}).json()["predictions"]
    a, b, c = (p["event_id"] for p in preds)
    events = [{"event_id": a, "click": True}, {"event_id": a, "click": True},
              {"event_id": "nope", "click": False}, {"event_id": b, "label": 1},
              {"event_id": c, "click": False}, 17]
    r = client.post("/v1/models/m1/feedback", json={"events": events}, headers=tenant)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"] == 2
    codes = {x["index"]: x["error"]["code"] for x in body["rejected"]}
    assert codes == {1: "duplicate_feedback", 2: "unknown_event", 3: "invalid_feedback",
                     5: "invalid_request"}
    assert body["rejected"][2]["error"]["field"] == "events[3].label"
    r = client.post("/v1/models/m1/sync", headers=tenant)
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 2


def _context_bytes(redis_url: str) -> int:
    import redis

    with redis.Redis.from_url(redis_url) as r:
        return sum(int(r.memory_usage(k) or 0) for k in r.scan_iter(match="*:ctx:*"))


@pytest.mark.slow
def test_sparse_instances_on_a_wide_model_stay_small_in_redis(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """The issue's example: 100 sparse instances (3 non-zeros each) of a 100,000-feature
    model were logged dense, 80 MB of contexts; kept sparse they take 26 KB, and the
    trainer applies them as before."""
    r = client.post("/v1/models", headers=tenant, json={
        "model_id": "wide", "task": "label", "algorithm": "rcnbf", "n_features": 100_000,
        "n_classes": 3, "seed": 0})
    assert r.status_code == 201, r.text
    instances = [{"indices": [i, 1000 + i, 99_000 + i], "values": [1.0, 0.5, 2.0]}
                 for i in range(100)]
    preds = _predict(client, tenant, {"instances": instances}, model="wide").json()["predictions"]
    stored = _context_bytes(redis_url)
    assert stored < 100 * 2_000, stored  # dense: 100 x 800 KB
    events = [{"event_id": p["event_id"], "click": i % 2 == 0} for i, p in enumerate(preds)]
    assert client.post("/v1/models/wide/feedback", json={"events": events},
                       headers=tenant).json()["accepted"] == 100
    assert client.post("/v1/models/wide/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/wide", headers=tenant).json()["stats"]
    assert stats["events_applied"] == 100 and stats["events_dead_lettered"] == 0
