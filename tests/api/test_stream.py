"""The WebSocket stream: auth by header or first message, ordered replies, errors keep it open."""

from __future__ import annotations

import pytest
from starlette.websockets import WebSocketDisconnect

from tests.api.conftest import ADMIN, TestClient, new_model


def test_stream_header_auth_predict_feedback_in_order(client: TestClient,
                                                      tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        for i in range(3):
            ws.send_json({"op": "predict", "id": i, "features": [1, 0, 0, 0]})
        replies = [ws.receive_json() for _ in range(3)]
        assert [r["id"] for r in replies] == [0, 1, 2]
        eid = replies[0]["result"]["event_id"]
        ws.send_json({"op": "feedback", "id": "f", "event_id": eid, "click": True})
        ws.send_json({"op": "feedback", "id": "g", "event_id": eid, "click": True})
        ws.send_text("not json")
        ws.send_json({"op": "dance", "id": 9})
        ws.send_json({"op": "predict", "id": 10, "features": [1, 0]})
        ws.send_json({"op": "predict", "id": 11, "features": [0, 1, 0, 0], "explore": False})
        got = [ws.receive_json() for _ in range(6)]
        assert got[0] == {"id": "f", "result": {"accepted": True}}
        assert got[1]["error"]["code"] == "duplicate_feedback"
        assert got[2]["error"]["code"] == "invalid_json"
        assert got[3]["error"]["code"] == "unknown_op"
        assert got[4]["error"]["field"] == "features"
        # each error carries the status the same HTTP request gets
        assert [g["error"]["status"] for g in got[1:5]] == [409, 422, 422, 422]
        assert "label" in got[5]["result"] and "event_id" not in got[5]["result"]


def test_stream_first_message_auth(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    key = tenant["Authorization"].removeprefix("Bearer ")
    with client.websocket_connect("/v1/models/m1/stream") as ws:
        ws.send_json({"op": "auth", "api_key": key})
        ws.send_json({"op": "predict", "id": "a", "instances": [[1, 0, 0, 0]] * 2})
        assert len(ws.receive_json()["result"]["predictions"]) == 2


@pytest.mark.parametrize("first", [{"op": "auth", "api_key": "nl.acme.0123456789abcdef.xxxxxxxx"
                                                             "xxxxxxxxxxxxxxxxxxx"},
                                   {"op": "predict", "features": [1, 0, 0, 0]}])
def test_stream_failed_auth_closes_4401(client: TestClient, tenant: dict[str, str],
                                        first: dict) -> None:
    new_model(client, tenant)
    with client.websocket_connect("/v1/models/m1/stream") as ws:
        ws.send_json(first)
        with pytest.raises(WebSocketDisconnect) as exc:
            ws.receive_json()
        assert exc.value.code == 4401


def test_stream_revoked_key_stops_at_once(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    key_id = tenant["Authorization"].split(".")[2]
    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        ws.send_json({"op": "predict", "id": 1, "features": [1, 0, 0, 0]})
        assert "result" in ws.receive_json()
        client.delete(f"/v1/admin/tenants/acme/keys/{key_id}", headers=ADMIN)
        ws.send_json({"op": "predict", "id": 2, "features": [1, 0, 0, 0]})
        assert ws.receive_json()["error"]["code"] == "invalid_api_key"


def test_stream_feedback_keeps_its_place_among_predicts_in_flight(
        client: TestClient, tenant: dict[str, str]) -> None:
    """Predicts are handled concurrently, but a feedback waits for the messages before it
    and holds back the ones after it: duplicates are decided by arrival, replies in order."""
    new_model(client, tenant)
    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        ws.send_json({"op": "predict", "id": "first", "features": [1, 0, 0, 0]})
        eid = ws.receive_json()["result"]["event_id"]
        sent = []
        for i in range(40):
            if i % 10 == 5:  # the same event, four times, between predicts in flight
                ws.send_json({"op": "feedback", "id": f"f{i}", "event_id": eid, "click": True})
            else:
                ws.send_json({"op": "predict", "id": i, "features": [i % 2, 1, 0, 0]})
            sent.append(f"f{i}" if i % 10 == 5 else i)
        replies = [ws.receive_json() for _ in sent]
    assert [r["id"] for r in replies] == sent
    feedback = [r for r in replies if isinstance(r["id"], str)]
    assert feedback[0]["result"] == {"accepted": True}
    assert [r["error"]["code"] for r in feedback[1:]] == ["duplicate_feedback"] * 3
    assert len({r["result"]["event_id"] for r in replies if isinstance(r["id"], int)}) == 36
