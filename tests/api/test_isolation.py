"""Two tenants: a key of one can neither see, nor change, nor use the other's models."""

from __future__ import annotations

import pytest

from tests.api.conftest import TestClient, new_model, new_tenant

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow


def test_foreign_key_gets_404_on_every_model_route(client: TestClient) -> None:
    a = new_tenant(client, "alpha")
    b = new_tenant(client, "beta")
    new_model(client, a)
    eid = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                      headers=a).json()["event_id"]
    snap = client.get("/v1/models/m1/snapshot", headers=a).json()
    calls = [
        ("GET", "/v1/models/m1", None),
        ("DELETE", "/v1/models/m1", None),
        ("POST", "/v1/models/m1/reset", None),
        ("GET", "/v1/models/m1/snapshot", None),
        ("PUT", "/v1/models/m1/snapshot", snap),
        ("POST", "/v1/models/m1/sync", None),
        ("POST", "/v1/models/m1/predict", {"features": [1, 0, 0, 0]}),
        ("POST", "/v1/models/m1/rank", {"features": [1, 0, 0, 0],
                                        "actions": [{"id": "a", "features": [1, 0, 0, 0]}]}),
        ("POST", "/v1/models/m1/feedback", {"event_id": eid, "click": True}),
        ("POST", "/v1/models/m1/feedback", {"events": [{"event_id": eid, "click": True}]}),
        ("GET", "/v1/models/m1/noise", None),
        ("PUT", "/v1/models/m1/noise", {"rho0": 0.1, "rho1": 0.1}),
        ("POST", "/v1/models/m1/noise/estimate", None),
        ("GET", "/v1/models/m1/dead-letters", None),
        ("DELETE", "/v1/models/m1/dead-letters", None),
        ("DELETE", "/v1/models/m1/dead-letters/1-0", None),
        ("POST", "/v1/models/m1/dead-letters/1-0/retry", None),
    ]
    for method, path, body in calls:
        r = client.request(method, path, json=body, headers=b)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "unknown_model"
    assert client.get("/v1/models", headers=b).json()["models"] == []
    # B may create its own m1; A's model is untouched by all of the above
    new_model(client, b)
    r = client.post("/v1/models/m1/feedback", json={"event_id": eid, "click": True}, headers=b)
    assert r.status_code == 404
    mine = client.get("/v1/models/m1", headers=a).json()
    assert mine["version"] == 1 and mine["stats"]["feedback_accepted"] == 0
    assert client.get("/v1/models/m1/noise", headers=a).json()["source"] == "initial"
    assert client.post("/v1/models/m1/feedback", json={"event_id": eid, "click": True},
                       headers=a).status_code == 202
    with client.websocket_connect("/v1/models/m1/stream", headers=b) as ws:
        ws.send_json({"op": "predict", "id": 1, "features": [1, 0, 0, 0]})
        assert ws.receive_json()["result"]["model_version"] == 1  # B's own m1
    new_model(client, a, model_id="only-a")
    with client.websocket_connect("/v1/models/only-a/stream", headers=b) as ws:
        assert ws.receive_json()["error"]["code"] == "unknown_model"
