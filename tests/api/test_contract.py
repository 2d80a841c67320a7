"""The request contract as a careless client meets it: strict types, any Content-Type, huge
indices, the Allow header of a 405, and an OpenAPI document as tight as the validation."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import ADMIN, new_model, post_feedback

BIG = (2**63, 2**64, 10**30)


def error(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    detail: dict[str, Any] = r.json()["error"]
    return detail


# --- strict types ------------------------------------------------------------------------

@pytest.mark.parametrize("explore", ["no", "false", 0, 1, None])
def test_explore_must_be_a_boolean(idle_client: TestClient, tenant: dict[str, str],
                                   explore: Any) -> None:
    new_model(idle_client, tenant)
    r = idle_client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0],
                                                        "explore": explore}, headers=tenant)
    assert error(r, 422)["field"] == "explore"


@pytest.mark.parametrize("overrides,field", [
    ({"params": {"gamma": "0.1"}}, "params.gamma"),
    ({"algorithm": "soba", "params": {"diagonal": "no"}}, "params.diagonal"),
    ({"algorithm": "soba", "params": {"diagonal": 0}}, "params.diagonal"),
    ({"algorithm": "rcine", "params": {"percentile": "50"}}, "params.percentile"),
    ({"algorithm": "rcnbf", "params": {"rho0": True}}, "params.rho0"),
    ({"n_features": "4"}, "n_features"),
    ({"seed": 1.5}, "seed"),
    ({"task": "regression", "algorithm": "ors", "n_classes": None,
      "label_budget": {"budget": "2"}}, "label_budget.budget"),
    ({"feedback": {"wait_seconds": "60"}}, "feedback.wait_seconds"),
])
def test_create_refuses_strings_for_numbers_and_booleans(
        idle_client: TestClient, tenant: dict[str, str], overrides: dict[str, Any],
        field: str) -> None:
    body = {"model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 4,
            "n_classes": 3, **overrides}
    r = idle_client.post("/v1/models", json={k: v for k, v in body.items() if v is not None},
                         headers=tenant)
    assert error(r, 422)["field"] == field
    assert idle_client.get("/v1/models/m1", headers=tenant).status_code == 404


@pytest.mark.parametrize("overrides,field", [
    ({"algorithm": "soba", "params": {"a": 2**70}}, "params.a"),
    ({"seed": 2**53}, "seed"),   # beyond what every JSON reader keeps exact
    ({"task": "regression", "algorithm": "ors", "n_classes": None,
      "label_budget": {"budget": 1.0, "strategy": "begin", "horizon": 2**64}},
     "label_budget.horizon"),
])
def test_create_refuses_integers_no_config_can_store(
        idle_client: TestClient, tenant: dict[str, str], overrides: dict[str, Any],
        field: str) -> None:
    body = {"model_id": "m1", "task": "label", "n_features": 4, "n_classes": 3, **overrides}
    r = idle_client.post("/v1/models", json={k: v for k, v in body.items() if v is not None},
                         headers=tenant)
    assert error(r, 422)["field"] == field


@pytest.mark.slow
def test_json_integers_are_numbers(idle_client: TestClient, tenant: dict[str, str]) -> None:
    m = new_model(idle_client, tenant, params={"gamma": 0.1, "rho0": 0}, algorithm="rcnbf")
    assert m["params"]["gamma"] == 0.1 and m["params"]["rho0"] == 0
    r = idle_client.put("/v1/models/m1/noise", json={"rho0": 0, "rho1": 0}, headers=tenant)
    assert r.status_code == 200, r.text
    r = idle_client.put("/v1/models/m1/noise", json={"rho0": "0.1", "rho1": 0}, headers=tenant)
    assert error(r, 422)["field"] == "rho0"


def test_feedback_click_must_be_a_boolean(idle_client: TestClient,
                                         tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    event_id = idle_client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                                headers=tenant).json()["event_id"]
    for click in ("true", 1, 0, 1.0):  # a number is never taken for a boolean
        r = post_feedback(idle_client, tenant, {"event_id": event_id, "click": click})
        assert error(r, 422)["field"] == "click", click
        assert "true or false" in r.json()["error"]["message"], r.text
    r = post_feedback(idle_client, tenant, {"events": [{"event_id": event_id, "click": 1}]})
    assert r.status_code == 202 and r.json()["rejected"][0]["error"]["field"] == "events[0].click"
    assert post_feedback(idle_client, tenant, {"event_id": event_id, "click": True}).status_code \
        == 202


@pytest.mark.slow
def test_snapshot_import_is_strict(idle_client: TestClient, tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    snap = idle_client.get("/v1/models/m1/snapshot", headers=tenant).json()
    name = next(iter(snap["state"]))
    bad = {**snap, "state": {**snap["state"], name: {**snap["state"][name],
                                                     "shape": [str(n) for n in
                                                               snap["state"][name]["shape"]]}}}
    r = idle_client.put("/v1/models/m1/snapshot", json=bad, headers=tenant)
    assert error(r, 422)["field"].startswith(f"state.{name}.shape")
    assert idle_client.put("/v1/models/m1/snapshot", json=snap, headers=tenant).status_code == 200


# --- Content-Type ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_json_body_without_content_type_is_read(idle_client: TestClient,
                                                  tenant: dict[str, str]) -> None:
    body = b'{"model_id": "m1", "task": "label", "n_features": 4, "n_classes": 3}'
    r = idle_client.post("/v1/models", content=body, headers=tenant)
    assert r.status_code == 201, r.text
    r = idle_client.post("/v1/models/m1/predict", content=b'{"instances": [[1, 0, 0, 0]]}',
                         headers=tenant)
    assert r.status_code == 200, r.text
    r = idle_client.post("/v1/models/m1/feedback", content=b'{"event_id": "nope", "click": true}',
                         headers=tenant)
    assert error(r, 404)["code"] == "unknown_event"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x"])
def test_a_body_of_another_type_gets_415(idle_client: TestClient, tenant: dict[str, str],
                                         content_type: str) -> None:
    new_model(idle_client, tenant)
    for path, auth in (("/v1/models/m1/predict", tenant), ("/v1/models/m1/feedback", tenant),
                       ("/v1/models", tenant), ("/v1/admin/tenants", ADMIN)):
        r = idle_client.post(path, content=b'{"features": [1, 0, 0, 0]}',
                             headers={**auth, "Content-Type": content_type})
        detail = error(r, 415)
        assert detail["code"] == "unsupported_media_type"
        assert "application/json" in detail["message"] and detail["field"] == "Content-Type"
    # credentials still come first
    r = idle_client.post("/v1/models", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 401


def test_json_suffix_media_types_are_json(idle_client: TestClient,
                                          tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    r = idle_client.post("/v1/models/m1/predict", content=b'{"features": [1, 0, 0, 0]}',
                         headers={**tenant, "Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


# --- huge indices ------------------------------------------------------------------------

@pytest.mark.parametrize("index", BIG)
def test_huge_sparse_index_is_a_422_naming_it(idle_client: TestClient, tenant: dict[str, str],
                                              index: int) -> None:
    new_model(idle_client, tenant)
    sparse = {"indices": [1, index], "values": [1.0, 2.0]}
    r = idle_client.post("/v1/models/m1/predict", json={"features": sparse}, headers=tenant)
    assert error(r, 422)["field"] == "features.indices[1]"
    r = idle_client.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0], sparse]},
                         headers=tenant)
    assert error(r, 422)["field"] == "instances[1].indices[1]"


def test_huge_index_rejects_one_feedback_item_only(idle_client: TestClient,
                                                   tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant, task="noisy_label", algorithm="uma")
    good = {"features": [1, 0, 0, 0], "label": 1}
    bad = {"features": {"indices": [2**63], "values": [1.0]}, "label": 1}
    r = post_feedback(idle_client, tenant, {"events": [good, bad, good,
                                                       {**good, "label": 2**63}]})
    assert r.status_code == 202, r.text
    doc = r.json()
    assert doc["accepted"] == 2
    assert [(e["index"], e["error"]["field"]) for e in doc["rejected"]] == [
        (1, "events[1].features.indices[0]"), (3, "events[3].label")]
    assert error(post_feedback(idle_client, tenant, bad), 422)["field"] == \
        "features.indices[0]"


def test_huge_index_over_the_websocket(idle_client: TestClient,
                                       tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    with idle_client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        for i, index in enumerate(BIG):
            ws.send_json({"op": "predict", "id": i,
                          "features": {"indices": [index], "values": [1.0]}})
            reply = ws.receive_json()
            assert reply["id"] == i and reply["error"]["code"] == "invalid_request", reply
            assert reply["error"]["field"] == "features.indices[0]"
        ws.send_json({"op": "predict", "id": "ok", "features": [1, 0, 0, 0]})
        assert "label" in ws.receive_json()["result"]


# --- 405 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,allowed", [
    ("PUT", "/v1/models/m1", {"GET", "DELETE"}),
    ("POST", "/v1/models/m1/noise", {"GET", "PUT"}),
    ("PATCH", "/v1/models", {"GET", "POST"}),
    ("GET", "/v1/models/m1/predict", {"POST"}),
])
def test_405_allows_every_method_of_the_path(idle_client: TestClient, tenant: dict[str, str],
                                             method: str, path: str, allowed: set[str]) -> None:
    r = idle_client.request(method, path, headers=tenant)
    assert error(r, 405)["code"] == "method_not_allowed"
    assert {m.strip() for m in r.headers["allow"].split(",")} == allowed


# --- the published contract --------------------------------------------------------------

def test_openapi_publishes_the_enforced_constraints(idle_client: TestClient) -> None:
    spec = idle_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    create = schemas["ModelCreateRequest"]["properties"]
    assert set(create["task"]["enum"]) == {"label", "label_set", "regression", "noisy_label",
                                           "noisy_input", "rank", "continuous"}
    assert "rcnbf" in create["algorithm"]["anyOf"][0]["enum"]
    assert schemas["PredictRequest"]["oneOf"] == [{"required": ["features"]},
                                                  {"required": ["instances"]}]
    assert "null" not in str(schemas["PredictRequest"]["properties"]["features"])
    assert schemas["NoisyLabelFeedback"]["oneOf"] == [{"required": ["event_id"]},
                                                      {"required": ["features"]}]
    indices = schemas["SparseFeatures"]["properties"]["indices"]["items"]
    assert indices["minimum"] == 0 and indices["exclusiveMaximum"] == 1_000_000
    matrix = schemas["ConfusionPutRequest"]["properties"]["matrix"]["anyOf"][0]
    assert matrix["minItems"] == 2 and matrix["items"]["minItems"] == 2
    array = schemas["ArrayPayload"]["properties"]
    assert array["shape"]["items"]["minimum"] == 0 and "pattern" in array["data_b64"]
    estimate = spec["paths"]["/v1/models/{model_id}/noise/estimate"]["post"]
    timeout = next(p for p in estimate["parameters"] if p["name"] == "timeout")["schema"]
    assert timeout["minimum"] > 0.001 and timeout["maximum"] == 300
    assert {"200", "202", "504"} <= set(estimate["responses"])


def test_explicit_nulls_the_schema_does_not_allow_are_refused(
        idle_client: TestClient, tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    for body in ({"features": None, "instances": [[1, 0, 0, 0]]}, {"features": None},
                 {"instances": None}):
        r = idle_client.post("/v1/models/m1/predict", json=body, headers=tenant)
        assert error(r, 422)["code"] == "invalid_request"
    new_model(idle_client, tenant, model_id="n", task="noisy_label", algorithm="uma")
    r = post_feedback(idle_client, tenant, {"event_id": None, "features": [1, 0, 0, 0],
                                            "label": 0}, model="n")
    assert error(r, 422)["code"] == "invalid_request"


@pytest.mark.slow
def test_openapi_uses_standard_keywords_only(idle_client: TestClient) -> None:
    """pydantic writes bounds it cannot place as its own keywords (ge, lt): no client reads
    those, so every bound must come out as minimum / maximum."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            found.extend(f"{path}.{k}" for k in ("ge", "gt", "le", "lt") if k in node
                         and not isinstance(node[k], dict))
            for key, value in node.items():
                if key != "properties" or not isinstance(value, dict):
                    walk(value, f"{path}.{key}")
                else:
                    for name, sub in value.items():
                        walk(sub, f"{path}.properties.{name}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(idle_client.get("/openapi.json").json(), "")
    assert found == []
