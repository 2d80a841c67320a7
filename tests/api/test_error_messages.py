"""Errors that say what is expected: the field a feedback takes, the route a rank model
serves, the closest algorithm, the id not shown, where a body stops being JSON, what a fixed
policy takes; no pydantic prefix."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import TestClient, new_model


@pytest.fixture
def events(client: TestClient, tenant: dict[str, str]) -> dict[str, str]:
    """A label model m1 and a rank model r, with one decision each: their event ids."""
    new_model(client, tenant)
    r = client.post("/v1/models", json={"model_id": "r", "task": "rank", "n_features": 3,
                                        "n_action_features": 2}, headers=tenant)
    assert r.status_code == 201, r.text
    label = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                        headers=tenant).json()["event_id"]
    ranked = client.post("/v1/models/r/rank", json={"features": [1, 0, 0], "actions": [
        {"id": "a", "features": [1, 0]}, {"id": "b", "features": [0, 1]}]}, headers=tenant)
    return {"m1": label, "r": ranked.json()["event_id"]}


def _error(client: TestClient, tenant: dict[str, str], path: str, body: Any) -> dict[str, Any]:
    r = client.post(path, json=body, headers=tenant)
    assert r.status_code == 422, r.text
    error: dict[str, Any] = r.json()["error"]
    return error


@pytest.mark.parametrize(("model", "body", "field", "expected"), [
    ("r", {"click": True}, "click", "takes no 'click' (did you mean 'clicks'?)"),
    ("m1", {"clicks": ["a"]}, "clicks", "takes no 'clicks' (did you mean 'click'?)"),
])
def test_feedback_with_another_tasks_field_names_the_expected_one(
        client: TestClient, tenant: dict[str, str], events: dict[str, str], model: str,
        body: dict[str, Any], field: str, expected: str) -> None:
    event = {"event_id": events[model], **body}
    for sent, path in ((event, field), ({"events": [event]}, f"events[0].{field}")):
        r = client.post(f"/v1/models/{model}/feedback", json=sent, headers=tenant)
        error = r.json()["error"] if r.status_code == 422 else r.json()["rejected"][0]["error"]
        assert error["field"] == path and expected in error["message"], error


def test_a_validators_message_comes_without_pydantics_prefix(
        client: TestClient, tenant: dict[str, str], events: dict[str, str]) -> None:
    error = _error(client, tenant, "/v1/models/m1/feedback",
                   {"event_id": events["m1"], "click": 3})
    assert error["message"] == ("click must be true or false (a JSON boolean, not a number or a "
                                "string)") and error["field"] == "click"


def test_a_misspelt_algorithm_is_unknown_with_the_closest_one(
        client: TestClient, tenant: dict[str, str]) -> None:
    error = _error(client, tenant, "/v1/models", {"model_id": "x", "task": "label",
                                                   "algorithm": "rcnfb", "n_features": 3,
                                                   "n_classes": 2})
    assert error["field"] == "algorithm"
    assert error["message"].startswith("unknown algorithm 'rcnfb' (did you mean 'rcnbf'?)")
    error = _error(client, tenant, "/v1/models", {"model_id": "x", "task": "label",
                                                   "algorithm": "ors", "n_features": 3,
                                                   "n_classes": 2})
    assert "does not fit task 'label' (it serves ['regression'])" in error["message"]


@pytest.mark.parametrize(("body", "field", "expected"), [
    ({"model_id": "x", "task": "label", "n_feature": 3, "n_classes": 2}, "n_feature",
     "the body takes no 'n_feature' (did you mean 'n_features'?); it takes model_id, task,"),
    ({"model_id": "x", "task": "label", "n_features": 3, "n_classes": 2,
      "feedback": {"wait_second": 5}}, "feedback.wait_second",
     "feedback takes no 'wait_second' (did you mean 'wait_seconds'?); it takes wait_seconds,"),
])
def test_a_misspelt_field_is_named_with_the_closest_one(
        client: TestClient, tenant: dict[str, str], body: dict[str, Any], field: str,
        expected: str) -> None:
    """The unknown field is named before the field it misspells is missing."""
    error = _error(client, tenant, "/v1/models", body)
    assert error["field"] == field and error["message"].startswith(expected), error


def test_a_click_on_an_id_not_shown_names_the_id(
        client: TestClient, tenant: dict[str, str], events: dict[str, str]) -> None:
    error = _error(client, tenant, "/v1/models/r/feedback",
                   {"event_id": events["r"], "clicks": ["a", "item-9"]})
    assert error["field"] == "clicks[1]" and "'item-9' was not shown" in error["message"]


def test_invalid_json_says_where(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = client.post("/v1/models/m1/predict", content=b'{"features": [1, 0,, 0]}',
                    headers={**tenant, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_json"
    assert r.json()["error"]["message"].endswith("at character 19"), r.text


@pytest.mark.parametrize(("policy", "expected"), [
    ("fixed:item-3", "N is a number, not an item id"),
    ("fixd:1", "unknown policy 'fixd:1': expected uniform, logging"),
])
def test_an_unknown_policy_says_what_is_expected(
        client: TestClient, tenant: dict[str, str], events: dict[str, str], policy: str,
        expected: str) -> None:
    error = _error(client, tenant, "/v1/models/r/evaluations", {"policy": policy})
    assert error["field"] == "policy" and expected in error["message"], error
