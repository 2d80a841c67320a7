"""Apprentice mode through the service: the caller's baseline is served and learned from,
agreement and rewards are reported, and one call switches the model online."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
import pytest
import redis

from app.api import modelops
from app.api.apprentice import check_mode
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.learners.registry import default_params, learner_class
from app.store import codec
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, post_feedback, sweep
from tests.api.test_rank import candidates, new_ranker, rank_one

K = 3


def _apprentice(client: TestClient, auth: dict[str, str]) -> dict[str, Any]:
    return new_model(client, auth, algorithm="linucb_diag", n_features=K, n_classes=K,
                     mode="apprentice")


def _round(client: TestClient, auth: dict[str, str], contexts: np.ndarray,
           baseline: bool = True) -> list[dict[str, Any]]:
    """Predict for each context (one-hot of its best label), click when the label served is
    that best label, sync; the predictions."""
    body: dict[str, Any] = {"instances": np.eye(K)[contexts].tolist()}
    if baseline:
        body["baseline"] = contexts.tolist()
    r = client.post("/v1/models/m1/predict", json=body, headers=auth)
    assert r.status_code == 200, r.text
    predictions: list[dict[str, Any]] = r.json()["predictions"]
    events = [{"event_id": p["event_id"], "click": p["label"] == k}
              for p, k in zip(predictions, contexts.tolist(), strict=True)]
    assert post_feedback(client, auth, {"events": events}).json()["accepted"] == len(events)
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200
    return predictions


def _report(client: TestClient, auth: dict[str, str]) -> dict[str, Any]:
    report: dict[str, Any] = client.get("/v1/models/m1", headers=auth).json()["apprentice"]
    return report


@pytest.mark.slow
def test_apprentice_serves_the_baseline_learns_it_and_switches_online(
        client: TestClient, tenant: dict[str, str]) -> None:
    created = _apprentice(client, tenant)
    assert created["mode"] == "apprentice" and created["apprentice"]["agreement"] is None
    rng = np.random.default_rng(0)
    first = rng.integers(0, K, 30)
    served = _round(client, tenant, first)
    assert [p["label"] for p in served] == first.tolist()
    assert {p["probability"] for p in served} == {1.0}
    early = _report(client, tenant)
    assert early["decisions"] == early["events"] == 30
    assert early["baseline_reward"] == 1.0  # the baseline is optimal: every event clicked
    assert early["agreement"] < 0.9, early  # the model starts knowing nothing

    later = rng.integers(0, K, 60)
    served = _round(client, tenant, later)
    assert all(p["greedy_label"] == k for p, k in zip(served, later.tolist(), strict=True))
    report = _report(client, tenant)
    assert report["decisions"] == 90 and report["agreement"] > early["agreement"] + 0.2
    assert report["agreed_events"] >= 60 and report["model_value_estimate"] == 1.0

    r = client.put("/v1/models/m1/mode", json={"mode": "online"}, headers=tenant)
    assert r.status_code == 200 and r.json()["mode"] == "online", r.text
    assert r.json()["apprentice"]["decisions"] == 90  # still reported after the switch
    r = client.post("/v1/models/m1/predict", json={
        "instances": np.eye(K).tolist(), "baseline": [2, 2, 2], "explore": False},
        headers=tenant)
    assert [p["label"] for p in r.json()["predictions"]] == [0, 1, 2]  # the model's own
    assert _report(client, tenant)["decisions"] == 90  # online decisions are not counted


def test_logging_mode_serves_the_baseline_counts_its_feedback_and_learns_nothing(
        client: TestClient, tenant: dict[str, str]) -> None:
    created = new_model(client, tenant, algorithm="linucb_diag", n_features=K, n_classes=K,
                        mode="logging")
    assert created["mode"] == "logging", created
    initial = client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"]
    contexts = np.random.default_rng(0).integers(0, K, 30)
    served = _round(client, tenant, contexts)
    assert [p["label"] for p in served] == contexts.tolist()
    assert {p["probability"] for p in served} == {1.0}
    model = client.get("/v1/models/m1", headers=tenant).json()
    assert (model["stats"]["events_applied"], model["apprentice"]["decisions"],
            model["apprentice"]["events"]) == (30, 30, 30), model
    assert model["apprentice"]["baseline_reward"] == 1.0  # every baseline label was clicked
    assert client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"] == initial

    r = client.put("/v1/models/m1/mode", json={"mode": "online"}, headers=tenant)
    assert r.status_code == 200 and r.json()["mode"] == "online", r.text
    _round(client, tenant, contexts, baseline=False)
    assert client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"] != initial
    r = client.put("/v1/models/m1/mode", json={"mode": "logging"}, headers=tenant)
    assert r.status_code == 200 and r.json()["mode"] == "logging", r.text


def test_switching_to_apprentice_mode_and_the_fast_path(client: TestClient,
                                                        tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag", n_features=K, n_classes=K)
    online = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0]}, headers=tenant)
    assert online.status_code == 200
    r = client.put("/v1/models/m1/mode", json={"mode": "apprentice"}, headers=tenant)
    assert r.status_code == 200 and r.json()["apprentice"]["decisions"] == 0, r.text
    missing = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0]}, headers=tenant)
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "baseline"
    one = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0], "baseline": 2},
                      headers=tenant).json()
    assert (one["label"], one["probability"], one["greedy_label"]) == (2, 1.0, 0)
    assert "expected_reward" not in one  # it was the greedy label's, not the baseline's
    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        ws.send_json({"op": "predict", "id": 1, "features": [0, 1, 0], "baseline": 1})
        assert ws.receive_json()["result"]["label"] == 1


def test_ranking_apprentice_serves_the_baseline_ranking(client: TestClient,
                                                        tenant: dict[str, str]) -> None:
    new_ranker(client, tenant, mode="apprentice")
    rng = np.random.default_rng(0)
    actions = candidates(5, rng)
    baseline = ["item-4", "item-2", "item-0", "item-1"]
    r = rank_one(client, tenant, {"features": [1, 0, 0], "actions": actions,
                                  "baseline": baseline})
    assert r.status_code == 200, r.text
    ranking = r.json()["ranking"]
    assert [a["id"] for a in ranking] == baseline[:3]
    assert {a["probability"] for a in ranking} == {1.0}
    ok = post_feedback(client, tenant, {"event_id": r.json()["event_id"], "clicks": ["item-4"]},
                       model="feed")
    assert ok.status_code == 202
    report = client.get("/v1/models/feed", headers=tenant).json()["apprentice"]
    assert (report["decisions"], report["events"], report["baseline_reward"]) == (1, 1, 1.0)
    for body, field in (
            ({"features": [1, 0, 0], "actions": actions}, "baseline"),
            ({"features": [1, 0, 0], "actions": actions, "baseline": ["item-4", "x"]},
             "baseline[1]"),
            ({"features": [1, 0, 0], "actions": actions, "baseline": ["item-4", "item-4"]},
             "baseline[1]"),
            ({"features": [1, 0, 0], "actions": actions, "baseline": ["item-4"]}, "baseline"),
            ({"requests": [{"features": [1, 0, 0], "actions": actions}]},
             "requests[0].baseline")):
        bad = rank_one(client, tenant, body)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text


def test_bad_apprentice_input_names_the_field(client: TestClient,
                                              tenant: dict[str, str]) -> None:
    for overrides in ({"algorithm": "perceptron"}, {"task": "regression", "n_classes": None}):
        r = client.post("/v1/models", json={"model_id": "x", "task": "label", "n_features": 2,
                                            "n_classes": 2, "mode": "apprentice", **overrides},
                        headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"] == "mode", r.text
    _apprentice(client, tenant)
    for body, field in (({"features": [1, 0, 0], "baseline": 3}, "baseline"),
                        ({"features": [1, 0, 0], "baseline": "1"}, "baseline"),
                        ({"features": [1, 0, 0], "baseline": [1]}, "baseline"),
                        ({"instances": [[1, 0, 0]] * 2, "baseline": [1]}, "baseline"),
                        ({"instances": [[1, 0, 0]] * 2, "baseline": [1, 5]}, "baseline[1]")):
        r = client.post("/v1/models/m1/predict", json=body, headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)
    for body in ({"mode": "offline"}, {}, {"mode": "online", "x": 1}):
        r = client.put("/v1/models/m1/mode", json=body, headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"].startswith(("mode", "x")), \
            r.text
    assert client.put("/v1/models/nope/mode", json={"mode": "online"},
                      headers=tenant).status_code == 404


def test_a_mode_switch_never_undoes_a_promotion_written_meanwhile(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """PUT .../mode read the config, then a promotion wrote another algorithm and its state
    before the mode was written: the mode lands on the promoted config (a blind write put
    the old algorithm back over the promoted state)."""
    new_model(client, tenant, algorithm="linucb_diag", n_features=K, n_classes=K)
    mk = ModelKeys("acme", "m1")
    checks = 0

    def promote_meanwhile(*args: Any) -> None:
        nonlocal checks
        checks += 1
        if checks == 1:  # as challenger_promote.lua does: config and state in one step
            with redis.Redis.from_url(redis_url) as r:
                config = {**orjson.loads(r.hget(mk.meta, "config")),
                          "algorithm": "squarecb_diag",
                          "params": default_params(learner_class("label", "squarecb_diag"))}
                r.hset(mk.meta, "config", orjson.dumps(config))
                r.hset(mk.snapshot, mapping={
                    "state": codec.encode(build_learner(ModelConfig.of(config)).get_state()),
                    "version": int(r.hget(mk.snapshot, "version")) + 1})
        check_mode(*args)

    monkeypatch.setattr(modelops, "check_mode", promote_meanwhile)
    r = client.put("/v1/models/m1/mode", json={"mode": "apprentice"}, headers=tenant)
    assert r.status_code == 200, r.text
    assert (r.json()["algorithm"], r.json()["mode"]) == ("squarecb_diag", "apprentice")
    assert client.get("/v1/models/m1", headers=tenant).json()["algorithm"] == "squarecb_diag"


@pytest.mark.slow
def test_an_apprentice_decision_ended_by_the_no_click_default_counts_as_reward_0(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """Callers that report only clicks (on_timeout no_click) get the rest learned as no
    click: the baseline's mean reward counts them too (it counted only feedback, 1.0 here)."""
    new_model(client, tenant, algorithm="linucb_diag", n_features=K, n_classes=K,
              mode="apprentice", feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    body = {"instances": np.eye(K)[[0, 1, 2, 0]].tolist(), "baseline": [0, 1, 2, 0]}
    r = client.post("/v1/models/m1/predict", json=body, headers=tenant)
    assert r.status_code == 200, r.text
    clicked = r.json()["predictions"][0]["event_id"]
    assert post_feedback(client, tenant, {"event_id": clicked, "click": True}).status_code == 202
    deadline = time.monotonic() + 5.0  # due once a whole second of the Redis clock passed
    while _report(client, tenant)["events"] < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
        sweep(redis_url)
    report = _report(client, tenant)
    assert (report["decisions"], report["events"], report["baseline_reward"]) == (4, 4, 0.25)
    assert report["agreed_events"] <= 4
    with redis.Redis.from_url(redis_url) as r:
        assert not r.keys("*:appr:*")  # the flags end with their decisions


def test_feedback_after_a_switch_online_counts_for_the_apprentice_decisions(
        client: TestClient, tenant: dict[str, str]) -> None:
    """A decision counted in apprentice mode has its feedback counted when it comes after a
    switch online (it was dropped: decisions counted, their events never); the online
    decisions' feedback is not counted."""
    _apprentice(client, tenant)
    r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0], "baseline": 0},
                    headers=tenant)
    assert r.status_code == 200, r.text
    before = r.json()["event_id"]
    assert client.put("/v1/models/m1/mode", json={"mode": "online"},
                      headers=tenant).status_code == 200
    after = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0]},
                        headers=tenant).json()["event_id"]
    events = [{"event_id": before, "click": True}, {"event_id": after, "click": True}]
    assert post_feedback(client, tenant, {"events": events}).json()["accepted"] == 2
    report = _report(client, tenant)
    assert (report["decisions"], report["events"], report["baseline_reward"]) == (1, 1, 1.0)


def test_a_rank_batch_mixing_defer_counts_each_apprentice_decision_once(
        client: TestClient, tenant: dict[str, str]) -> None:
    """A batch mixing defer is logged in two steps; the first counts the batch's apprentice
    decisions, the second counted its own again."""
    new_ranker(client, tenant, mode="apprentice")
    actions = candidates(4, np.random.default_rng(1))
    baseline = ["item-3", "item-2", "item-1"]
    requests = [{"features": [1, 0, 0], "actions": actions, "baseline": baseline,
                 "defer": defer} for defer in (False, True, True)]
    r = client.post("/v1/models/feed/rank", json={"requests": requests}, headers=tenant)
    assert r.status_code == 200, r.text
    report = client.get("/v1/models/feed", headers=tenant).json()["apprentice"]
    assert report["decisions"] == 3, report
