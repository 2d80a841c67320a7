"""Every input limit answers a clear 4xx with the error shape naming the field, before work.

"Before work": the rejected predictions are not counted (nothing was
decided or logged) and the rejected feedback is not accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import TestClient, make_client
from tests.reliability.conftest import ADMIN, setup_model, setup_tenant

MAX_BYTES = 64 * 1024
MAX_DEPTH = 8


@pytest.fixture
def api(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url, trainer=False, max_body_bytes=MAX_BYTES,
                     max_json_depth=MAX_DEPTH) as c:
        yield c


@pytest.fixture
def auth(api: TestClient) -> dict[str, str]:
    headers = setup_tenant(api)
    setup_model(api, headers, "m1")
    return headers


def refused(r: Any, status: int, code: str, field: str | None) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert error["message"]


def test_body_over_limit_413_before_parsing(api: TestClient, auth: dict[str, str]) -> None:
    big = {"features": [0.0] * (MAX_BYTES // 4)}
    refused(api.post("/v1/models/m1/predict", json=big, headers=auth),
            413, "payload_too_large", None)
    # a lying Content-Length is refused before the body is read
    refused(api.post("/v1/models/m1/predict", content=b"{}",
                     headers={**auth, "Content-Length": str(MAX_BYTES + 1)}),
            413, "payload_too_large", None)
    with api.websocket_connect("/v1/models/m1/stream", headers=auth) as ws:
        ws.send_json({"op": "predict", "id": 1, **big})
        assert ws.receive_json()["error"]["code"] == "payload_too_large"
        ws.send_json({"op": "predict", "id": 2, "features": [1, 0, 0, 0]})
        assert "result" in ws.receive_json()
    assert api.get("/v1/models/m1", headers=auth).json()["stats"]["predictions"] == 1


def test_json_nesting_over_limit_422_json_too_deep(api: TestClient, auth: dict[str, str]) -> None:
    for depth in (MAX_DEPTH + 1, 1500, 30_000):
        body = b'{"features": ' + b"[" * depth + b"]" * depth + b"}"
        r = api.post("/v1/models/m1/predict", content=body,
                     headers={**auth, "Content-Type": "application/json"})
        refused(r, 422, "json_too_deep", None)
    named = b'{"features": {"named": ' + b'{"a": ' * 20 + b"1" + b"}" * 20 + b"}}"
    refused(api.post("/v1/models/m1/predict", content=named,
                     headers={**auth, "Content-Type": "application/json"}),
            422, "json_too_deep", None)
    # brackets inside strings do not count: this is depth 3, refused only for its feature
    r = api.post("/v1/models/m1/predict",
                 json={"features": {"named": {"[" * 100: "{" * 100}}}, headers=auth)
    assert r.status_code == 200, r.text
    with api.websocket_connect("/v1/models/m1/stream", headers=auth) as ws:
        ws.send_text('{"op": "predict", "id": 1, "features": ' + "[" * 50 + "]" * 50 + "}")
        reply = ws.receive_json()
        assert reply["error"]["code"] == "json_too_deep"
        ws.send_json({"op": "predict", "id": 2, "features": [1, 0, 0, 0]})
        assert "result" in ws.receive_json()


def test_batch_sizes_1_to_1000(api: TestClient, auth: dict[str, str]) -> None:
    refused(api.post("/v1/models/m1/predict", json={"instances": []}, headers=auth),
            422, "invalid_request", "instances")
    refused(api.post("/v1/models/m1/predict", json={"instances": [[0, 0, 0, 1]] * 1001},
                     headers=auth), 422, "invalid_request", "instances")
    refused(api.post("/v1/models/m1/feedback", json={"events": []}, headers=auth),
            422, "invalid_request", "events")
    events = [{"event_id": "a" * 22, "click": True}] * 1001
    refused(api.post("/v1/models/m1/feedback", json={"events": events}, headers=auth),
            422, "invalid_request", "events")
    assert api.get("/v1/models/m1", headers=auth).json()["stats"]["predictions"] == 0


@pytest.mark.parametrize(("field", "value"), [
    ("n_features", 0), ("n_features", 1_000_001), ("n_features", 2.5), ("n_features", "4"),
    ("n_classes", 1), ("n_classes", 10_001), ("model_id", "x" * 129), ("model_id", "a/b"),
    ("model_id", ""), ("task", "nope"), ("feedback.wait_seconds", 0),
    ("feedback.wait_seconds", 30 * 86400 + 1)])
def test_model_create_bounds(api: TestClient, auth: dict[str, str], field: str,
                             value: Any) -> None:
    body: dict[str, Any] = {"model_id": "m2", "task": "label", "algorithm": "rcnbf",
                            "n_features": 4, "n_classes": 3}
    if "." in field:
        outer, inner = field.split(".")
        body[outer] = {inner: value}
    else:
        body[field] = value
    r = api.post("/v1/models", json=body, headers=auth)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.json()
    assert api.get("/v1/models/m2", headers=auth).status_code == 404


def test_feature_dimension_and_strings(api: TestClient, auth: dict[str, str]) -> None:
    def post(body: dict[str, Any]) -> Any:
        return api.post("/v1/models/m1/predict", json=body, headers=auth)
    refused(post({"features": [1, 2, 3]}), 422, "invalid_features", "features")
    refused(post({"features": [1, 2, 3, 4, 5]}), 422, "invalid_features", "features")
    refused(post({"features": {"indices": [4], "values": [1.0]}}), 422, "invalid_features",
            "features.indices[0]")
    refused(post({"instances": [[1, 0, 0, 0], [1, 0, 0]]}), 422, "invalid_features",
            "instances[1]")
    r = post({"features": {"named": {"x" * 257: 1.0}}})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("features.named"), \
        r.text
    r = post({"features": {"named": {"country": "y" * 257}}})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("features.named"), \
        r.text
    refused(api.post("/v1/admin/tenants", json={"tenant_id": "t" * 64}, headers=ADMIN),
            422, "invalid_request", "tenant_id")
    refused(api.post("/v1/admin/tenants", json={"tenant_id": "Upper"}, headers=ADMIN),
            422, "invalid_request", "tenant_id")


def test_event_id_format(api: TestClient, auth: dict[str, str]) -> None:
    for bad in ("", "x" * 65, "a b", "../../etc", "nl:{acme:m1}:ctx:x", 17, None):
        refused(api.post("/v1/models/m1/feedback", json={"event_id": bad, "click": True},
                         headers=auth), 422, "invalid_request", "event_id")
    r = api.post("/v1/models/m1/feedback",
                 json={"events": [{"event_id": "ok-id", "click": True},
                                  {"event_id": "{tag}", "click": True}]}, headers=auth)
    assert r.status_code == 202
    rejected = {e["index"]: e["error"] for e in r.json()["rejected"]}
    assert rejected[0]["code"] == "unknown_event"
    assert (rejected[1]["code"], rejected[1]["field"]) == ("invalid_request", "events[1].event_id")


def test_path_ids_validated(api: TestClient, auth: dict[str, str]) -> None:
    refused(api.get("/v1/models/" + "x" * 129, headers=auth), 422, "invalid_request",
            "model_id")
    refused(api.get("/v1/models/-bad{tag}", headers=auth), 422, "invalid_request", "model_id")
    refused(api.delete("/v1/admin/tenants/NOT_A_TENANT", headers=ADMIN), 422,
            "invalid_request", "tenant_id")
    refused(api.delete("/v1/admin/tenants/acme/keys/not-hex", headers=ADMIN), 422,
            "invalid_request", "key_id")
    # without credentials the same requests get 401, not a description of the schema
    refused(api.get("/v1/models/" + "x" * 129), 401, "unauthenticated", None)
    refused(api.delete("/v1/admin/tenants/NOT_A_TENANT", headers=auth), 401,
            "invalid_admin_token", None)
