"""Fuzzing below the schema: WebSocket messages, raw request bodies, feedback for real events.

- WebSocket: hypothesis-generated JSON messages (and non-JSON text) on one
  open ``/v1/models/{id}/stream``; every reply is ``{"id", "result"}`` or
  ``{"id", "error"}`` with the error shape, and the socket stays open.
- Raw bodies: arbitrary bytes, arbitrary JSON and deeply nested JSON on
  every POST/PUT route: always a 4xx with the error shape, never a 5xx.
- Invalid feedback for a real, open event: rejected (4xx), the event is
  not consumed (a valid feedback afterwards is accepted) and the model is
  unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import TestClient, make_client
from tests.reliability.conftest import FUZZ_EXAMPLES, setup_model, setup_tenant

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=FUZZ_EXAMPLES * 5, deadline=None, database=None,
                    derandomize=True, suppress_health_check=list(HealthCheck))

json_scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                           max_leaves=20)
finite = st.floats(allow_nan=False, allow_infinity=False)
features = (st.lists(finite | st.integers(-10, 10), max_size=6)
            | st.fixed_dictionaries({"indices": st.lists(st.integers(-2, 6), max_size=4),
                                     "values": st.lists(finite, max_size=4)})
            | st.fixed_dictionaries({"named": st.dictionaries(st.text(max_size=8),
                                                              finite | st.text(max_size=5),
                                                              max_size=4)})
            | json_values)


@pytest.fixture
def api(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url, trainer=False) as c:
        yield c


def is_error(doc: Any, *, with_status: bool = False) -> bool:
    """An error as the HTTP API gives it; ``with_status``: as the WebSocket gives it, with the
    HTTP status it stands for (4xx)."""
    fields = {"code", "message", "field", "status"} if with_status else {"code", "message",
                                                                         "field"}
    return isinstance(doc, dict) and set(doc) == fields and isinstance(doc["code"], str) and \
        (not with_status or (isinstance(doc["status"], int) and 400 <= doc["status"] < 500))


def messages(event_ids: list[str]) -> st.SearchStrategy[Any]:
    """Predict/feedback/auth/unknown ops with fuzzed fields, plain JSON values, junk."""
    event_id = st.sampled_from(event_ids) | st.text(max_size=70) | json_values
    predict = st.fixed_dictionaries(
        {"op": st.just("predict"), "id": json_values},
        optional={"features": features, "instances": st.lists(features, max_size=3),
                  "explore": json_values, "extra": json_values})
    feedback = st.fixed_dictionaries(
        {"op": st.just("feedback"), "id": json_values},
        optional={"event_id": event_id, "click": json_values, "label": json_values,
                  "events": st.lists(st.fixed_dictionaries(
                      {"event_id": event_id}, optional={"click": json_values}), max_size=3)})
    other = st.fixed_dictionaries({"op": json_values}, optional={"id": json_values,
                                                                 "api_key": json_values})
    valid = st.fixed_dictionaries({"op": st.just("predict"), "id": st.integers(),
                                   "features": st.lists(st.floats(-1e6, 1e6), min_size=4,
                                                        max_size=4)})
    return valid | predict | feedback | other | json_values


def test_fuzz_stream_messages_always_answered_socket_stays_open(api: TestClient) -> None:
    auth = setup_tenant(api)
    setup_model(api, auth, "m1")
    r = api.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0]] * 5}, headers=auth)
    event_ids = [p["event_id"] for p in r.json()["predictions"]]
    counts = {"result": 0, "error": 0}
    with api.websocket_connect("/v1/models/m1/stream", headers=auth) as ws:

        @SETTINGS
        @given(message=messages(event_ids), as_text=st.booleans())
        def run(message: Any, as_text: bool) -> None:
            if as_text and isinstance(message, str):
                ws.send_text(message)  # not necessarily JSON
                expected_id = None
            else:
                ws.send_text(json.dumps(message))
                expected_id = message.get("id") if isinstance(message, dict) else None
            reply = ws.receive_json()
            assert set(reply) in ({"id", "result"}, {"id", "error"}), reply
            assert reply["id"] == expected_id
            if "error" in reply:
                assert is_error(reply["error"], with_status=True), reply
                counts["error"] += 1
            else:
                counts["result"] += 1

        run()
        # found by the long run: ids beyond 64 bits came back as floats (and could not be sent)
        for big in (2**70, -(2**63) - 1, [{"k": 2**64}]):
            ws.send_text(json.dumps({"op": "predict", "id": big, "features": [1, 0, 0, 0]}))
            assert ws.receive_json()["id"] == big
        ws.send_json({"op": "predict", "id": "last", "features": [1, 0, 0, 0]})
        assert ws.receive_json()["result"]["model_version"] == 1
    print("websocket fuzz:", counts)
    assert counts["error"] > 0 and counts["result"] > 0


BODY_ROUTES = [("POST", "/v1/models"), ("POST", "/v1/models/m1/predict"),
               ("POST", "/v1/models/m1/feedback"), ("PUT", "/v1/models/m1/noise"),
               ("PUT", "/v1/models/m1/snapshot"), ("POST", "/v1/admin/tenants")]
raw_bodies = (st.binary(max_size=200)
              | json_values.map(lambda v: json.dumps(v).encode())
              | st.tuples(st.integers(1, 5000), st.sampled_from("[{")).map(
                  lambda t: (t[1] if t[1] == "[" else '{"a":') * t[0]).map(str.encode))


def test_fuzz_raw_bodies_get_4xx_with_error_shape(api: TestClient) -> None:
    from tests.reliability.conftest import ADMIN

    auth = setup_tenant(api)
    setup_model(api, auth, "m1")
    before = api.get("/v1/models/m1", headers=auth).json()

    @SETTINGS
    @given(route=st.sampled_from(BODY_ROUTES), body=raw_bodies)
    def run(route: tuple[str, str], body: bytes) -> None:
        method, path = route
        headers = {**(ADMIN if path.startswith("/v1/admin") else auth),
                   "Content-Type": "application/json"}
        r = api.request(method, path, content=body, headers=headers)
        assert r.status_code < 500, (route, body[:100], r.text)
        if r.status_code >= 400:
            assert is_error(r.json()["error"]), r.text
        else:  # valid JSON that happens to be a valid request: only tenant creation can be
            assert route == ("POST", "/v1/admin/tenants"), (route, body[:100], r.text)

    run()
    after = api.get("/v1/models/m1", headers=auth).json()
    assert after["version"] == before["version"] and after["noise"] == before["noise"]


invalid_feedback = st.fixed_dictionaries(
    {}, optional={"click": json_values.filter(lambda v: v not in (True, False, 0, 1)),
                  "label": json_values, "extra": json_values, "events": json_values})


def test_fuzz_invalid_feedback_for_real_event_does_not_consume_it(api: TestClient) -> None:
    auth = setup_tenant(api)
    setup_model(api, auth, "m1")
    r = api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]}, headers=auth)
    event_id = r.json()["event_id"]
    before = api.get("/v1/models/m1/snapshot", headers=auth).json()

    @SETTINGS
    @given(body=invalid_feedback)
    def run(body: dict[str, Any]) -> None:
        body = {"events": body["events"]} if "events" in body else {**body, "event_id": event_id}
        r = api.post("/v1/models/m1/feedback", json=body, headers=auth)
        if r.status_code == 202:  # a batch: every event must have been rejected
            assert r.json()["accepted"] == 0, (body, r.text)
        else:
            assert 400 <= r.status_code < 500 and is_error(r.json()["error"]), (body, r.text)

    run()
    assert api.get("/v1/models/m1/snapshot", headers=auth).json() == before
    stats = api.get("/v1/models/m1", headers=auth).json()["stats"]
    assert stats["feedback_accepted"] == 0
    r = api.post("/v1/models/m1/feedback", json={"event_id": event_id, "click": True},
                 headers=auth)
    assert r.status_code == 202, r.text
