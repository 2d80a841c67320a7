"""``feedback.aggregation: "sum"`` through the native API: a rank model adds up the rewards
of each ranking until its wait passed, and learns the sums exactly once then."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import orjson
import redis

from app.store.keys import ModelKeys
from tests.api.conftest import ADMIN, TestClient, new_model, post_feedback, sweep
from tests.api.test_rank import candidates, new_ranker, rank_one
from tests.deadlines import pass_deadlines


def _learned_clicks(client: TestClient, auth: dict[str, str]) -> list[list[float]]:
    """Each logged event's clicks per slot, in increasing order."""
    r = client.get("/v1/models/feed/log", headers=auth)
    assert r.status_code == 200, r.text
    return sorted([s["click"] for s in line["slots"]]
                  for line in map(orjson.loads, r.content.splitlines())
                  if line["type"] == "event")


def _feedback_counts(client: TestClient) -> dict[str, float]:
    """``noisyloop_feedback_total`` of model ``feed`` by outcome (those counted)."""
    text = client.get("/metrics", headers=ADMIN).text
    return {m[1]: float(m[2]) for m in re.finditer(
        r'noisyloop_feedback_total\{model="feed",outcome="(\w+)"[^}]*\} (\S+)', text)
        if float(m[2])}


def test_feedback_of_a_summing_rank_model_adds_up_until_the_wait(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """Single and batch feedback add to the ranking's slots (by the ids shown, sums clipped
    to 1), nothing is learned before the wait passed, each ranking is learned once then, a
    ranking without feedback gets the no-click default, and later feedback is 404."""
    model = new_ranker(client, tenant, slots=2, feedback={
        "wait_seconds": 60, "on_timeout": "no_click", "aggregation": "sum"})
    assert model["feedback"]["aggregation"] == "sum"
    rng = np.random.default_rng(4)
    results = rank_one(client, tenant, {"requests": [
        {"features": [1, 0, 0], "actions": candidates(4, rng)} for _ in range(3)]}).json()[
        "results"]
    first, second = ([r["id"] for r in result["ranking"]] for result in results[:2])
    events = [result["event_id"] for result in results]
    bodies: list[Any] = [
        {"event_id": events[0], "rewards": {first[0]: 0.5}},
        {"events": [{"event_id": events[0], "rewards": {first[0]: 0.25, first[1]: 0.75}},
                    {"event_id": events[1], "clicks": [second[1]]},
                    {"event_id": events[0], "clicks": [first[1]]}]},
        {"event_id": events[1], "rewards": {second[0]: 0.125}}]
    for body in bodies:
        r = post_feedback(client, tenant, body, model="feed")
        assert r.status_code == 202, r.text
        assert r.json().get("rejected", []) == []
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    assert client.get("/v1/models/feed", headers=tenant).json()["stats"]["events_applied"] == 0
    # every feedback, single or in a batch, is counted open (accepted, not joined yet)
    assert _feedback_counts(client) == {"open": 5.0}
    with redis.Redis.from_url(redis_url) as r:
        assert pass_deadlines(r, ModelKeys("acme", "feed"), 120) == 3
    sweep(redis_url)
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/feed", headers=tenant).json()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (3, 3), stats
    # event 0: 0.5 + 0.25 in slot 0, 0.75 + 1 (clipped) in slot 1; event 1: 0.125 and 1;
    # event 2: none (no click in either slot)
    assert _learned_clicks(client, tenant) == [[0.0, 0.0], [0.125, 1.0], [0.75, 1.0]]
    late = post_feedback(client, tenant, {"event_id": events[0], "clicks": []}, model="feed")
    assert late.status_code == 404


def test_a_sum_of_feedback_is_refused_for_a_task_that_does_not_add_it_up(
        client: TestClient, tenant: dict[str, str]) -> None:
    r = client.post("/v1/models", headers=tenant, json={
        "model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 4,
        "n_classes": 3, "feedback": {"aggregation": "sum"}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "feedback.aggregation"
    assert new_model(client, tenant)["feedback"]["aggregation"] == "earliest"
