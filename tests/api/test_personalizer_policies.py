"""Personalizer's evaluations of other learning settings through the real SDK: listed
policies replayed on the loop's log (``policySource`` ``Custom``), the policy optimization's
search (``OfflineExperimentation``, ``optimalPolicy``), each answer the native evaluation of
the same configuration (the replay's truth is checked in
``tests/evaluation/test_rankreplay.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
from azure.core.exceptions import HttpResponseError

from tests.api.test_evaluations import run_jobs
from tests.api.test_personalizer import (
    ACTIONS,
    P_LIKED,
    P_OTHER,
    SEGMENTS,
    Loop,
    Service,
    _admin,
    _client,
    _loop,
    service,
)

__all__ = ["service"]  # the module's service fixture, shared

@pytest.fixture
def loop(service: Service) -> Iterator[Loop]:
    yield from _loop(service)


#: Decisions the loop logs before it is evaluated.
EVENTS = 300


def _played(loop: Loop) -> dict[str, str]:
    """The simulated world of ``test_personalizer`` played through the SDK for
    :data:`EVENTS` events; the evaluation window."""
    client = _client(loop)
    rng = np.random.default_rng(3)
    start = datetime.now(UTC) - timedelta(seconds=1)
    for t in range(EVENTS):
        segment = list(SEGMENTS)[t % len(SEGMENTS)]
        answer = client.rank({"contextFeatures": [{"user": {"segment": segment}}],
                              "actions": ACTIONS})
        p = P_LIKED if answer["rewardActionId"] == SEGMENTS[segment] else P_OTHER
        client.reward(answer["eventId"], {"value": float(rng.random() < p)})
    loop.sync()
    end = datetime.now(UTC) + timedelta(seconds=1)
    return {"startTime": start.isoformat(), "endTime": end.isoformat()}


def test_listed_and_searched_policies_are_replayed_on_the_log(service: Service,
                                                               loop: Loop) -> None:
    admin = _admin(loop)
    window = _played(loop)
    admin.create_evaluation("ev", {"name": "search", **window, "enablePolicyOptimization": True,
                                   "policies": [{"name": "greedier", "arguments":
                                                 "--cb_explore_adf --epsilon 0.05"}]})
    assert run_jobs(service.redis_url) >= 7
    done = admin.get_evaluation("ev", start_time=datetime.fromisoformat(window["startTime"]),
                                end_time=datetime.fromisoformat(window["endTime"]))
    assert done["status"] == "Succeeded", done
    value = done["content"]["value"]
    assert [e["policySource"] for e in value] == [
        "Online", "Random", "Custom", *["OfflineExperimentation"] * 4]
    custom = value[2]
    assert custom["name"] == "greedier"
    config = orjson.loads(custom["arguments"])
    assert config["params"]["epsilon"] == 0.05
    native = custom["noisyloop"]
    assert native["replay"] == {"learned": EVENTS, "scored": EVENTS, "unscored": 0}
    assert custom["summary"]["confidenceInterval"] == [native["snips"]["ci_low"],
                                                       native["snips"]["ci_high"]]
    # the same configuration through the native evaluation gives the same numbers
    r = loop.api.post("/v1/models/loop/evaluations", json={
        "policy": config, "since": window["startTime"], "until": window["endTime"]})
    assert r.status_code == 202, r.text
    assert run_jobs(service.redis_url) == 1
    job = loop.api.get(f"/v1/models/loop/evaluations/{r.json()['job_id']}").json()
    assert job["status"] == "done", job
    assert job["snips"] == native["snips"]
    ranked = [e for e in value[2:] if e["summary"]["expectedReward"] is not None]
    assert ranked  # 300 events: the replays are not all flagged
    best = max(ranked, key=lambda e: e["summary"]["expectedReward"])
    assert done["optimalPolicy"] == best["name"]

    # applying it: the loop's policy is the setting's, through a promotion (a new version,
    # a promote marker in the log), keeping what the loop learned
    before = loop.model()
    admin.apply_from_evaluation({"evaluationId": "ev", "policyName": best["name"]})
    applied = orjson.loads(admin.get_policy()["arguments"])
    assert applied == orjson.loads(best["arguments"])
    after = loop.model()
    assert after["version"] > before["version"]
    assert after["stats"]["events_applied"] == before["stats"]["events_applied"]
    log = loop.api.get("/v1/models/loop/log", params={"order": "desc", "limit": 1})
    assert orjson.loads(log.content.splitlines()[0])["type"] == "promote"
    assert loop.api.get("/v1/models/loop/challengers").json()["challengers"] == []


def test_applying_names_the_evaluation_and_the_policy(service: Service, loop: Loop) -> None:
    admin = _admin(loop)
    with pytest.raises(HttpResponseError) as raised:
        admin.apply_from_evaluation({"evaluationId": "none", "policyName": "p"})
    assert raised.value.status_code == 404
    assert "Target: evaluationId" in str(raised.value)
    window = _played(loop)
    admin.create_evaluation("ev", {"name": "one", **window})
    with pytest.raises(HttpResponseError) as raised:  # still running
        admin.apply_from_evaluation({"evaluationId": "ev", "policyName": "Online Policy"})
    assert raised.value.status_code == 409
    run_jobs(service.redis_url)
    version = loop.model()["version"]
    admin.apply_from_evaluation({"evaluationId": "ev", "policyName": "Online Policy"})
    assert loop.model()["version"] == version  # the online policy is in force: nothing to do
    with pytest.raises(HttpResponseError) as raised:
        admin.apply_from_evaluation({"evaluationId": "ev", "policyName": "other"})
    assert raised.value.status_code == 404
    assert "Target: policyName" in str(raised.value)


@pytest.mark.parametrize(("policies", "field"), [
    ([{"name": "p", "arguments": "--cb_explore_adf --cover 3"}], "policies[0].arguments"),
    ([{"name": "Online Policy", "arguments": "--cb_adf"}], "policies"),
    ([{"name": "p", "arguments": "--cb_adf"}, {"name": "p", "arguments": "--cb_adf"}],
     "policies")])
def test_bad_policies_are_refused_naming_the_field(loop: Loop, policies: list[dict[str, Any]],
                                                   field: str) -> None:
    now = datetime.now(UTC)
    with pytest.raises(HttpResponseError) as raised:
        _admin(loop).create_evaluation("bad", {
            "name": "bad", "startTime": (now - timedelta(hours=1)).isoformat(),
            "endTime": now.isoformat(), "policies": policies})
    assert raised.value.status_code == 400  # Personalizer's status of a bad request
    assert f"Target: {field}" in str(raised.value), raised.value


def test_a_loops_decisions_log_every_candidate(loop: Loop) -> None:
    """What a replay needs: each logged ranking holds every candidate's features (the
    excluded ones left out), not only the shown one's; a rank model of no preset logs only
    the shown ones (while it has no challengers)."""
    answer = _client(loop).rank({"contextFeatures": [{"user": {"segment": "fan"}}],
                                 "actions": ACTIONS, "excludedActions": ["music"]})
    _client(loop).reward(answer["eventId"], {"value": 1.0})
    r = loop.api.post("/v1/models", json={"model_id": "plain", "task": "rank",
                                          "n_features": 4, "slots": 1})
    assert r.status_code == 201, r.text
    ranked = loop.api.post("/v1/models/plain/rank", json={
        "features": [1.0, 0.0, 0.0, 0.0], "actions": [
            {"id": "a", "features": [1.0, 0.0, 0.0, 0.0]},
            {"id": "b", "features": [0.0, 1.0, 0.0, 0.0]}]}).json()
    r = loop.api.post("/v1/models/plain/feedback", json={"event_id": ranked["event_id"],
                                                         "clicks": []})
    assert r.status_code == 202, r.text
    loop.sync()
    assert loop.api.post("/v1/models/plain/sync").status_code == 200
    lines = [orjson.loads(line) for line in
             loop.api.get("/v1/models/loop/log").content.splitlines()]
    events = [line for line in lines if line["type"] == "event"]
    assert len(events) == 1
    candidates = events[0]["context"]["candidates"]
    assert len(candidates) == len(ACTIONS) - 1
    assert events[0]["slots"][0]["features"] in candidates
    plain = [orjson.loads(line) for line in
             loop.api.get("/v1/models/plain/log").content.splitlines()]
    assert next(line for line in plain if line["type"] == "event").get("context") is None
