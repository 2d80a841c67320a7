"""Deferred activation through the service: a decision made with ``defer: true`` is logged
but neither learned from nor defaulted until ``POST .../events/{event_id}/activate``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import redis

from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, new_tenant, post_feedback, sweep
from tests.api.test_rank import candidates, new_ranker, rank_one
from tests.deadlines import pass_deadlines

MK = ModelKeys("acme", "m1")
#: Context TTL of a decision of the tests' models: wait_seconds (1) + the default grace.
GRACE_SECONDS = 3600
#: The decisions' wait (s) where none may reach its deadline during the test.
WAIT = 120


def _predict(client: TestClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0], **body},
                    headers=auth)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _activate(client: TestClient, auth: dict[str, str], event_id: str,
              model: str = "m1") -> Any:
    return client.post(f"/v1/models/{model}/events/{event_id}/activate", headers=auth)


def _stream_event_ids(redis_url: str) -> list[bytes]:
    with redis.Redis.from_url(redis_url) as r:
        return [fields[b"e"] for _, fields in r.xrange(MK.events)]


@pytest.mark.slow
def test_deferred_decision_is_learned_only_once_activated(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    # wait_seconds long enough that the plain decision below never reaches its deadline
    # before the last sweep, however slow the machine
    new_model(client, tenant, feedback={"wait_seconds": WAIT, "on_timeout": "no_click"})
    shown = _predict(client, tenant, defer=True)
    never = _predict(client, tenant, defer=True)
    early = post_feedback(client, tenant, {"event_id": shown["event_id"], "click": True})
    assert early.status_code == 409, early.text
    error = early.json()["error"]
    assert (error["code"], error["field"]) == ("not_activated", "event_id")
    assert "activate" in error["message"]

    with redis.Redis.from_url(redis_url) as r:  # past the deadlines a decision without defer
        assert pass_deadlines(r, MK) == 0  # would have had: a deferred one has none yet
    sweep(redis_url)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (0, 0), stats

    r = _activate(client, tenant, shown["event_id"])
    assert r.status_code == 200, r.text
    assert r.json()["event_id"] == shown["event_id"] and r.json()["deadline"] > time.time()
    again = _activate(client, tenant, shown["event_id"])
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_active"
    plain = _predict(client, tenant)
    assert _activate(client, tenant, plain["event_id"]).status_code == 409
    unknown = _activate(client, tenant, "no-such-event")
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "event_id"

    ok = post_feedback(client, tenant, {"event_id": shown["event_id"], "click": True})
    assert ok.status_code == 202, ok.text
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert (stats["feedback_accepted"], stats["events_applied"]) == (1, 1), stats

    # the never-activated decision keeps its context only for wait_seconds + the grace period
    with redis.Redis.from_url(redis_url) as r:
        ttl = r.ttl(MK.context(never["event_id"]))
        assert WAIT < ttl <= WAIT + GRACE_SECONDS
        r.pexpire(MK.context(never["event_id"]), 1)  # let that time pass
    time.sleep(0.05)
    assert _activate(client, tenant, never["event_id"]).status_code == 404
    late = post_feedback(client, tenant, {"event_id": never["event_id"], "click": True})
    assert late.status_code == 404
    sweep(redis_url)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert (stats["events_applied"], stats["events_expired"]) == (1, 0), stats
    assert never["event_id"].encode() not in _stream_event_ids(redis_url)


@pytest.mark.slow
def test_activated_decision_is_defaulted_at_its_new_deadline(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant, feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    deferred = _predict(client, tenant, defer=True)
    assert _activate(client, tenant, deferred["event_id"]).status_code == 200
    with redis.Redis.from_url(redis_url) as r:
        assert pass_deadlines(r, MK) == 1
    sweep(redis_url)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (1, 1), stats


def test_batch_rank_and_websocket_decisions_defer(client: TestClient,
                                                  tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    r = client.post("/v1/models/m1/predict", json={
        "instances": [[1, 0, 0, 0], [0, 1, 0, 0]], "defer": True}, headers=tenant)
    batch = r.json()["predictions"]
    refused = post_feedback(client, tenant, {"events": [
        {"event_id": p["event_id"], "click": True} for p in batch]})
    assert refused.status_code == 202
    assert [e["error"]["code"] for e in refused.json()["rejected"]] == ["not_activated"] * 2
    assert refused.json()["rejected"][1]["error"]["field"] == "events[1].event_id"
    assert _activate(client, tenant, batch[1]["event_id"]).status_code == 200
    taken = post_feedback(client, tenant, {"events": [
        {"event_id": p["event_id"], "click": True} for p in batch]})
    assert taken.json()["accepted"] == 1, taken.text

    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        ws.send_json({"op": "predict", "id": 1, "features": [0, 0, 1, 0], "defer": True})
        event_id = ws.receive_json()["result"]["event_id"]
        ws.send_json({"op": "feedback", "id": 2, "event_id": event_id, "click": False})
        assert ws.receive_json()["error"]["code"] == "not_activated"
    assert _activate(client, tenant, event_id).status_code == 200
    assert post_feedback(client, tenant, {"event_id": event_id, "click": False}
                         ).status_code == 202

    new_ranker(client, tenant)
    rng = np.random.default_rng(0)
    ranked = rank_one(client, tenant, {"requests": [
        {"features": [1, 0, 0], "actions": candidates(4, rng), "defer": True},
        {"features": [0, 1, 0], "actions": candidates(4, rng)}]}).json()["results"]
    clicks = [{"event_id": r["event_id"], "clicks": [r["ranking"][0]["id"]]} for r in ranked]
    first = post_feedback(client, tenant, {"events": clicks}, model="feed").json()
    assert first["accepted"] == 1 and first["rejected"][0]["error"]["code"] == "not_activated"
    assert _activate(client, tenant, ranked[0]["event_id"], model="feed").status_code == 200
    assert post_feedback(client, tenant, clicks[0], model="feed").status_code == 202


def test_bad_defer_requests_name_the_field(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    for body, field in (({"features": [1, 0, 0, 0], "defer": "yes"}, "defer"),
                        ({"features": [1, 0, 0, 0], "defer": True, "explore": False}, "defer")):
        r = client.post("/v1/models/m1/predict", json=body, headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    bad_id = _activate(client, tenant, "not%20an%20id")
    assert bad_id.status_code == 422 and bad_id.json()["error"]["field"] == "event_id", bad_id.text
    deferred = _predict(client, tenant, defer=True)
    assert _activate(client, {"Authorization": "Bearer nope"}, "e1").status_code == 401
    assert _activate(client, tenant, "e1", model="missing").status_code == 404
    other = new_tenant(client, "other")  # another tenant's model does not exist for it
    assert _activate(client, other, deferred["event_id"]).status_code == 404
    assert client.put("/v1/models/m1/mode", json={"mode": "online"},
                      headers=other).status_code == 404
    assert _activate(client, tenant, deferred["event_id"]).status_code == 200


def test_deleting_a_model_removes_its_deferred_decisions(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant)
    kept = _predict(client, tenant, defer=True)["event_id"]
    activated = _predict(client, tenant, defer=True)["event_id"]
    assert _activate(client, tenant, activated).status_code == 200
    with redis.Redis.from_url(redis_url) as r:
        assert [e.decode() for e in r.zrange(MK.deferred, 0, -1)] == [kept]
        assert r.exists(MK.context(kept), MK.context(activated)) == 2
    assert client.delete("/v1/models/m1", headers=tenant).status_code == 204
    with redis.Redis.from_url(redis_url) as r:
        assert r.exists(MK.context(kept), MK.context(activated), MK.deferred) == 0
    new_model(client, tenant)  # the same id again: the old decision is no one's
    assert _activate(client, tenant, kept).status_code == 404
