"""Personalizer's evaluations of other learning settings through the real SDK: listed
policies replayed on the loop's log (``policySource`` ``Custom``), the policy optimization's
search (``OfflineExperimentation``, ``optimalPolicy``), each answer the native evaluation of
the same configuration (the replay's truth is checked in
``tests/evaluation/test_rankreplay.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from azure.core.exceptions import HttpResponseError

from tests.api.test_evaluations import run_jobs
from tests.api.test_personalizer import (
    ACTIONS,
    ADMIN_TOKEN,
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


def _played(loop: Loop, flat: bool = False) -> dict[str, str]:
    """The simulated world of ``test_personalizer`` played through the SDK for
    :data:`EVENTS` events (``flat``: every action rewarded with probability 0.5, so every
    policy has the same value); the evaluation window."""
    client = _client(loop)
    rng = np.random.default_rng(3)
    start = datetime.now(UTC) - timedelta(seconds=1)
    for t in range(EVENTS):
        segment = list(SEGMENTS)[t % len(SEGMENTS)]
        answer = client.rank({"contextFeatures": [{"user": {"segment": segment}}],
                              "actions": ACTIONS})
        p = 0.5 if flat else P_LIKED if answer["rewardActionId"] == SEGMENTS[segment] \
            else P_OTHER
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


def _one_more_event(loop: Loop) -> None:
    """A rank and its reward, learned: a published batch (the auto-optimization hook's turn)."""
    client = _client(loop)
    answer = client.rank({"contextFeatures": [{"user": {"segment": "fan"}}],
                          "actions": ACTIONS})
    client.reward(answer["eventId"], {"value": 1.0})
    loop.sync()


def _auto_run(service: Service, loop: Loop, monkeypatch: pytest.MonkeyPatch,
              exploration: float, flat: bool = False) -> dict[str, Any]:
    """The loop at ``exploration`` plays the world, then auto-optimizes once: enabled, a
    batch starts the run, the jobs role evaluates, the next batch settles it; the run."""
    from workers import autooptimize

    monkeypatch.setattr(autooptimize, "CHECK_SECONDS", 0.0)
    admin = _admin(loop)
    admin.update_service_configuration({"explorationPercentage": exploration})
    _played(loop, flat)
    shown = admin.update_service_configuration({"isAutoOptimizationEnabled": True,
                                                "autoOptimizationFrequency": "PT10M"})
    assert (shown["isAutoOptimizationEnabled"], shown["autoOptimizationFrequency"]) == (
        True, "PT10M")
    _one_more_event(loop)
    runs = [e for e in admin.list_evaluations() if e["evaluationType"] == "Auto"]
    assert [e["status"] for e in runs] == ["Running"]
    assert run_jobs(service.redis_url) == 2 + 4
    _one_more_event(loop)
    runs = [e for e in admin.list_evaluations() if e["evaluationType"] == "Auto"]
    assert len(runs) == 1
    _one_more_event(loop)  # within the period: no second run
    assert len([e for e in admin.list_evaluations() if e["evaluationType"] == "Auto"]) == 1
    return runs[0]


def _metric(service: Service, outcome: str) -> float:
    text = httpx.get(f"{service.url}/metrics",
                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    line = next((line for line in text.splitlines() if line.startswith(
        f'noisyloop_auto_optimizations_total{{outcome="{outcome}"}}')), None)
    return 0.0 if line is None else float(line.split()[-1])


def test_auto_optimization_switches_to_a_setting_clearly_better(
        service: Service, loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop exploring 90% of the time (value about 0.1 * 0.8 + 0.9 * 0.35 = 0.40 once it
    learned) and searched settings exploring 2-20% (about 0.7 over a replay that learns from
    scratch): the searched intervals (about +-0.1 on 300 events) lie above the online one's
    (about +-0.06), and the loop switches, through a promotion."""
    applied = _metric(service, "applied")
    before = loop.model()["version"]
    run = _auto_run(service, loop, monkeypatch, 0.9)
    assert run["status"] == "OptimalPolicyApplied", run
    value = {e["name"]: e["summary"]["confidenceInterval"] for e in run["content"]["value"]}
    chosen = run["optimalPolicy"]
    assert value[chosen][0] > value["Online Policy"][1]
    epsilon = float(chosen.removeprefix("exploration-"))
    assert orjson.loads(_admin(loop).get_policy()["arguments"])["params"]["epsilon"] == epsilon
    assert loop.model()["version"] > before
    lines = [orjson.loads(line) for line in
             loop.api.get("/v1/models/loop/log").content.splitlines()]
    assert [line["challenger"] for line in lines if line["type"] == "promote"] != []
    assert _metric(service, "applied") == applied + 1


def test_auto_optimization_keeps_the_online_policy_without_a_clear_winner(
        service: Service, loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a world where every action is rewarded with probability 0.5 every policy has
    the same value: a searched interval lies above the online one's only by chance (each
    about +-0.06 on 300 events of the same log, so a searched estimate would need to exceed
    the online one by about two half-widths, 2.8 standard errors of an independent
    difference: about 0.3% a setting, about 1% for the four; the estimates share the log's
    rewards, which makes it rarer), and nothing changes."""
    retained = _metric(service, "retained")
    run = _auto_run(service, loop, monkeypatch, 0.02, flat=True)
    assert run["status"] == "OnlinePolicyRetained", run
    online = next(e for e in run["content"]["value"] if e["policySource"] == "Online")
    searched = [e for e in run["content"]["value"]
                if e["policySource"] == "OfflineExperimentation"]
    assert len(searched) == 4
    assert all(e["summary"]["confidenceInterval"][0] <= online["summary"]
               ["confidenceInterval"][1] for e in searched)
    assert orjson.loads(_admin(loop).get_policy()["arguments"])["params"]["epsilon"] == 0.02
    assert _metric(service, "retained") == retained + 1


def test_a_multi_slot_loop_refuses_other_settings_naming_the_field(service: Service) -> None:
    """A replay ranks the logged candidates into one slot: a multi-slot loop's evaluation of
    other settings, and its auto-optimization, are refused up front, naming the field."""
    for multi in _loop(service, slots=3):
        admin = _admin(multi)
        now = datetime.now(UTC)
        window = {"name": "w", "startTime": (now - timedelta(hours=1)).isoformat(),
                  "endTime": now.isoformat()}
        for body, field in (({"policies": [{"name": "p", "arguments": "--cb_adf"}]},
                             "policies"),
                            ({"enablePolicyOptimization": True}, "enablePolicyOptimization")):
            with pytest.raises(HttpResponseError) as raised:
                admin.create_evaluation("e", {**window, **body})
            assert raised.value.status_code == 400
            assert f"Target: {field}" in str(raised.value) and "3 slots" in str(raised.value)
        with pytest.raises(HttpResponseError) as raised:
            admin.update_service_configuration({"isAutoOptimizationEnabled": True})
        assert "Target: isAutoOptimizationEnabled" in str(raised.value)
        assert admin.get_service_configuration()["isAutoOptimizationEnabled"] is False
        assert list(admin.list_evaluations()) == []
