"""The rank task through the service: create, rank, feedback by id, exactly once, timeouts,
position bias and snapshots; every bad input a 422 naming its field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import redis

from app.sim.rank import RankSimulator, gap_closed
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, post_feedback, sweep
from tests.deadlines import pass_deadlines

DX, DA, SLOTS = 3, 2, 3


def new_ranker(client: TestClient, auth: dict[str, str], model_id: str = "feed",
               **overrides: Any) -> dict[str, Any]:
    body = {"model_id": model_id, "task": "rank", "n_features": DX, "n_action_features": DA,
            "slots": SLOTS, "seed": 0, **overrides}
    r = client.post("/v1/models", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()


def candidates(n: int, rng: np.random.Generator, prefix: str = "item") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{i}", "features": rng.standard_normal(DA).tolist()}
            for i in range(n)]


def rank_one(client: TestClient, auth: dict[str, str], body: dict[str, Any],
             model: str = "feed") -> Any:
    return client.post(f"/v1/models/{model}/rank", json=body, headers=auth)


@pytest.fixture
def ranked(client: TestClient, tenant: dict[str, str]) -> dict[str, Any]:
    """A rank model and one ranking of 10 candidates."""
    new_ranker(client, tenant)
    rng = np.random.default_rng(0)
    r = rank_one(client, tenant, {"features": [1.0, 0.2, -0.3], "actions": candidates(10, rng)})
    assert r.status_code == 200, r.text
    return r.json()


def test_rank_contract(client: TestClient, tenant: dict[str, str],
                       ranked: dict[str, Any]) -> None:
    assert set(ranked) >= {"event_id", "model_version", "ranking"}
    ranking = ranked["ranking"]
    assert [r["slot"] for r in ranking] == [0, 1, 2]
    assert len({r["id"] for r in ranking}) == 3
    assert all(0.0 < r["probability"] <= 1.0 and 0.0 <= r["expected_reward"] <= 1.0
               for r in ranking)
    model = client.get("/v1/models/feed", headers=tenant).json()
    assert model["params"]["n_action_features"] == DA and model["params"]["slots"] == SLOTS
    assert model["noise"]["rho0"] == 0.0 and model["stats"]["predictions"] == 1
    assert model["position_bias"] == {"values": [1.0, 1.0, 1.0], "source": "insufficient_data",
                                      "calibration_unreliable": True}


def test_fewer_slots_sparse_and_named_features_and_greedy(client: TestClient,
                                                          tenant: dict[str, str]) -> None:
    new_ranker(client, tenant)
    actions = [{"id": "a", "features": {"indices": [1], "values": [0.5]}},
               {"id": "b", "features": {"named": {"colour": "red", "size": 0.3}}},
               {"id": "c", "features": [0.1, 0.2]}]
    r = rank_one(client, tenant, {"features": {"named": {"country": "FR"}}, "actions": actions,
                                  "slots": 2})
    assert r.status_code == 200 and len(r.json()["ranking"]) == 2, r.text
    one = rank_one(client, tenant, {"features": [1, 0, 0], "actions": actions[:1]})
    assert [x["id"] for x in one.json()["ranking"]] == ["a"]  # fewer candidates than slots
    greedy = rank_one(client, tenant, {"features": [1, 0, 0], "actions": actions,
                                       "explore": False}).json()
    assert "event_id" not in greedy and all(x["probability"] == 1.0 for x in greedy["ranking"])


@pytest.mark.slow
def test_batch_rank_and_batch_feedback(client: TestClient, tenant: dict[str, str]) -> None:
    new_ranker(client, tenant)
    rng = np.random.default_rng(1)
    requests = [{"features": rng.standard_normal(DX).tolist(), "actions": candidates(5, rng)}
                for _ in range(4)]
    r = rank_one(client, tenant, {"requests": requests})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 4 and len({x["event_id"] for x in results}) == 4
    shown = [[x["id"] for x in result["ranking"]] for result in results]
    events = [{"event_id": results[0]["event_id"], "clicks": [shown[0][1]]},
              {"event_id": results[1]["event_id"], "rewards": {shown[1][0]: 0.7}},
              {"event_id": results[2]["event_id"], "clicks": ["not-shown"]},
              {"event_id": results[3]["event_id"], "clicks": []},
              {"event_id": "never-issued", "clicks": []}]
    r = post_feedback(client, tenant, {"events": events}, model="feed")
    assert r.status_code == 202, r.text
    doc = r.json()
    assert doc["accepted"] == 3
    fields = {e["index"]: e["error"] for e in doc["rejected"]}
    assert fields[2]["field"] == "events[2].clicks[0]" and fields[2]["code"] == "invalid_feedback"
    assert fields[4]["code"] == "unknown_event"
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/feed", headers=tenant).json()["stats"]
    assert stats["events_applied"] == 3
    # the slot-0 click of each applied event: 0 (a click in slot 1), 0.7, 0 (no click)
    assert stats["debiased_reward"] == pytest.approx(0.7 / 3)


@pytest.mark.slow
def test_feedback_exactly_once(client: TestClient, tenant: dict[str, str],
                               ranked: dict[str, Any]) -> None:
    shown = [r["id"] for r in ranked["ranking"]]
    bad = post_feedback(client, tenant, {"event_id": ranked["event_id"], "clicks": ["item-99"]},
                        model="feed")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "clicks[0]", bad.text
    rewards = post_feedback(client, tenant, {"event_id": ranked["event_id"],
                                             "rewards": {shown[0]: 0.5, "nope": 1.0}},
                            model="feed")
    assert rewards.status_code == 422 and rewards.json()["error"]["field"] == "rewards.nope"
    first = post_feedback(client, tenant, {"event_id": ranked["event_id"], "clicks": shown[1:2]},
                          model="feed")
    assert first.status_code == 202, first.text
    again = post_feedback(client, tenant, {"event_id": ranked["event_id"], "clicks": []},
                          model="feed")
    assert again.status_code == 409 and again.json()["error"]["code"] == "duplicate_feedback"
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    snap = client.get("/v1/models/feed/snapshot", headers=tenant).json()
    assert snap["version"] >= 1


@pytest.mark.parametrize(("body", "field"), [
    ({"features": [1, 0, 0], "actions": []}, "actions"),
    ({"features": [1, 0], "actions": [{"id": "a", "features": [0, 0]}]}, "features"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]},
                                         {"id": "b", "features": [0, 0, 1]}]},
     "actions[1].features"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]},
                                         {"id": "b", "features": [0, 0]},
                                         {"id": "a", "features": [1, 0]}]}, "actions[2].id"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": {"indices": [5],
                                                                  "values": [1.0]}}]},
     "actions[0].features.indices[0]"),
    ({"features": [1, 0, 0], "actions": [{"id": "", "features": [0, 0]}]}, "actions[0].id"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]}], "slots": 4},
     "slots"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]}], "slots": 0},
     "slots"),
    ({"features": [1, 0, 0], "actions": [{"id": "a"}]}, "actions[0].features"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [1e300, 1e300]}]},
     "actions[0].features"),
    ({"requests": [{"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]}]},
                   {"features": [1, 0, 0], "actions": [{"id": "a", "features": [0]}]}]},
     "requests[1].actions[0].features"),
    ({"requests": [{"features": [1, 0, 0], "actions": [{"id": "a", "features": [0, 0]},
                                                       {"id": "a", "features": [0, 0]}]}]},
     "requests[0].actions[1].id"),
])
def test_bad_rank_requests_name_the_field(client: TestClient, tenant: dict[str, str],
                                          body: dict[str, Any], field: str) -> None:
    new_ranker(client, tenant)
    r = rank_one(client, tenant, body)
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize(("body", "field"), [
    ({"clicks": ["a", "a"]}, "clicks[1]"),
    ({"clicks": ["a"], "rewards": {"a": 1.0}}, None),
    ({"rewards": {"a": 1.5}}, "rewards.a"),
    ({"rewards": {"a": -0.1}}, "rewards.a"),
    ({"click": True}, "click"),
    ({"clicks": "a"}, "clicks"),
])
def test_bad_rank_feedback_names_the_field(client: TestClient, tenant: dict[str, str],
                                           ranked: dict[str, Any], body: dict[str, Any],
                                           field: str | None) -> None:
    r = post_feedback(client, tenant, {"event_id": ranked["event_id"], **body}, model="feed")
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize(("overrides", "field"), [
    ({"slots": 0}, "slots"),
    ({"n_action_features": 0}, "n_action_features"),
    ({"params": {"slots": 2}}, "params.slots"),
    ({"params": {"position_bias": [1.0, 0.5]}}, "params.position_bias"),
    ({"task": "label", "n_classes": 3, "algorithm": "rcnbf"}, "n_action_features"),
])
def test_bad_rank_models_name_the_field(client: TestClient, tenant: dict[str, str],
                                        overrides: dict[str, Any], field: str) -> None:
    body = {"model_id": "feed", "task": "rank", "n_features": DX, "n_action_features": DA,
            "slots": SLOTS, **overrides}
    r = client.post("/v1/models", json=body, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


def test_a_rank_model_shows_the_sizes_in_use_when_left_to_their_defaults(
        client: TestClient, tenant: dict[str, str]) -> None:
    body = {"model_id": "plain", "task": "rank", "n_features": DX}
    created = client.post("/v1/models", json=body, headers=tenant)
    assert created.status_code == 201, created.text
    for model in (created.json(), client.get("/v1/models/plain", headers=tenant).json()):
        assert model["params"]["n_action_features"] == DX and model["params"]["slots"] == 3
    rng = np.random.default_rng(2)
    actions = [{"id": f"a{i}", "features": rng.standard_normal(DX).tolist()} for i in range(4)]
    r = rank_one(client, tenant, {"features": [1.0, 0.0, 0.0], "actions": actions},
                 model="plain")
    assert r.status_code == 200, r.text


def test_rank_of_a_label_model_and_predict_of_a_rank_model_are_422(
        client: TestClient, tenant: dict[str, str]) -> None:
    client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": DX,
                                    "n_classes": 3}, headers=tenant)
    r = rank_one(client, tenant, {"features": [1, 0, 0], "actions": [{"id": "a",
                                                                      "features": [0, 0]}]},
                 model="m1")
    assert r.status_code == 422 and r.json()["error"]["field"] == "model_id", r.text
    new_ranker(client, tenant)
    r = client.post("/v1/models/feed/predict", json={"features": [1, 0, 0]}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "model_id", r.text
    assert r.json()["error"]["code"] == "wrong_task"
    assert "'rank' model" in r.text and "/v1/models/feed/rank" in r.text


@pytest.mark.slow
def test_unanswered_rankings_become_no_clicks_at_the_timeout(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_ranker(client, tenant, feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    rng = np.random.default_rng(2)
    r = rank_one(client, tenant, {"requests": [
        {"features": [1, 0, 0], "actions": candidates(4, rng)} for _ in range(3)]})
    results = r.json()["results"]
    ok = post_feedback(client, tenant, {"event_id": results[0]["event_id"],
                                        "clicks": [results[0]["ranking"][0]["id"]]}, model="feed")
    assert ok.status_code == 202
    with redis.Redis.from_url(redis_url) as r:
        assert pass_deadlines(r, ModelKeys("acme", "feed")) == 2
    sweep(redis_url)
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/feed", headers=tenant).json()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (2, 3), stats
    assert stats["debiased_reward"] == pytest.approx(1 / 3)  # expired rankings: no click
    late = post_feedback(client, tenant, {"event_id": results[1]["event_id"], "clicks": []},
                         model="feed")
    assert late.status_code == 404
    snap = client.get("/v1/models/feed/snapshot", headers=tenant).json()
    assert snap["state"]["count_"]["shape"] == []


@pytest.mark.slow
def test_state_round_trips_through_the_snapshot(client: TestClient, tenant: dict[str, str],
                                                ranked: dict[str, Any]) -> None:
    post_feedback(client, tenant, {"event_id": ranked["event_id"],
                                   "clicks": [ranked["ranking"][0]["id"]]}, model="feed")
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    snap = client.get("/v1/models/feed/snapshot", headers=tenant).json()
    new_ranker(client, tenant, model_id="copy")
    put = client.put("/v1/models/copy/snapshot", json={"state": snap["state"]}, headers=tenant)
    assert put.status_code == 200, put.text
    again = client.get("/v1/models/copy/snapshot", headers=tenant).json()
    assert again["state"] == snap["state"]
    body = {"features": [1.0, 0.2, -0.3], "actions": candidates(10, np.random.default_rng(0)),
            "explore": False}
    assert (rank_one(client, tenant, body, model="copy").json()["ranking"]
            == rank_one(client, tenant, body).json()["ranking"])


def run_stream(client: TestClient, auth: dict[str, str], rounds: int, batch: int,
               params: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The issue's simulated stream through the service (batched rank and feedback, synced
    after each batch); gap closed over the last min(5,000, rounds / 6) requests, the position
    bias the model reports and the correlation of new items' scores with their relevance."""
    sim = RankSimulator(seed=seed)
    body = {"model_id": "sim", "task": "rank", "n_features": sim.n_features,
            "n_action_features": sim.n_action_features, "slots": sim.slots, "seed": seed,
            "params": params}
    assert client.post("/v1/models", json=body, headers=auth).status_code == 201
    values = np.zeros((rounds, 3))
    for start in range(0, rounds, batch):
        requests = [sim.request() for _ in range(min(batch, rounds - start))]
        r = rank_one(client, auth, {"requests": [
            {"features": q.x.tolist(),
             "actions": [{"id": str(i), "features": a.tolist()}
                         for i, a in zip(q.ids, q.actions, strict=True)]}
            for q in requests]}, model="sim")
        assert r.status_code == 200, r.text
        events = []
        for t, (q, result) in enumerate(zip(requests, r.json()["results"], strict=True)):
            row = {str(i): k for k, i in enumerate(q.ids)}
            ranking = np.array([row[x["id"]] for x in result["ranking"]])
            values[start + t] = sim.values(q, ranking)
            clicked = sim.clicks(q, ranking)
            events.append({"event_id": result["event_id"],
                           "clicks": [x["id"] for x, c in zip(result["ranking"], clicked,
                                                               strict=True) if c]})
        f = post_feedback(client, auth, {"events": events}, model="sim")
        assert f.status_code == 202 and f.json()["accepted"] == len(events), f.text
        assert client.post("/v1/models/sim/sync", headers=auth).status_code == 200
    tail = slice(rounds - min(5_000, rounds // 6), rounds)
    sim.churn_every = 1  # new items for the score check
    fresh = [sim.request() for _ in range(20)]
    singles = [{"features": q.x.tolist(), "explore": False,
                "actions": [{"id": "new", "features": a.tolist()}]}
               for q in fresh for a, new in zip(q.actions, q.new, strict=True) if new]
    truth = [g for q in fresh for g, new in zip(q.relevance, q.new, strict=True) if new]
    scored = rank_one(client, auth, {"requests": singles}, model="sim").json()["results"]
    scores = [x["ranking"][0]["expected_reward"] for x in scored]
    model = client.get("/v1/models/sim", headers=auth).json()
    return {"gap_closed": gap_closed(*values[tail].T),
            "position_bias": model["position_bias"],
            "new_items": len(scores), "new_item_correlation": float(np.corrcoef(scores,
                                                                                  truth)[0, 1])}


@pytest.mark.slow
def test_default_learner_on_the_simulated_stream(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    # the stream (churn 10% per 1,000, 20 candidates, 3 slots, theta (1, 0.6, 0.35),
    # click noise (0.03, 0.3)), untuned defaults and no noise rates given, rankings and
    # feedback in batches of 200; the position bias shown is the per-slot estimate's, which
    # the jobs role (not run here) publishes: flagged.  10,000 requests (gap over the last
    # 1,666): the curve is flat from 8,000 on (the same loop in process, seeds 0-29, `replay
    # --task rank --dataset sim --rounds 10000 --learn-batch 200 --repeats 30 --estimator
    # fixed --params '{"rho0": 0, "rho1": 0}'`: gap 0.868 +- 0.007 sd, worst 0.857, 9.8 sd
    # above 0.8 (0.861 +- 0.009, worst 0.840 when half_life was 3,000); new-item correlation
    # >= 0.86, 20 sd above 0.5, >= 197 items, measured then); through the service seed 0
    # closes 0.866 at 30,000
    out = run_stream(client, tenant, 10_000, 200, {})
    assert out["gap_closed"] >= 0.8, out
    assert out["position_bias"]["source"] == "insufficient_data", out
    assert out["new_items"] >= 100 and out["new_item_correlation"] >= 0.5, out


@pytest.mark.slow
def test_logged_propensities_match_the_policy_frequencies(client: TestClient,
                                                          tenant: dict[str, str]) -> None:
    new_ranker(client, tenant, params={"temperature": 0.3, "epsilon": 0.1})
    rng = np.random.default_rng(3)
    for _ in range(3):  # learn that the first action feature is relevant
        requests = [{"features": [1.0, *rng.standard_normal(DX - 1)], "actions":
                     candidates(6, rng)} for _ in range(200)]
        results = rank_one(client, tenant, {"requests": requests}).json()["results"]
        events = [{"event_id": res["event_id"], "clicks": [
            x["id"] for x in res["ranking"]
            if next(a for a in req["actions"] if a["id"] == x["id"])["features"][0] > 0.5]}
            for req, res in zip(requests, results, strict=True)]
        assert post_feedback(client, tenant, {"events": events}, model="feed").status_code == 202
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    request = {"features": [1.0, 0.0, 0.0], "actions": candidates(5, rng, "c")}
    n = 4000
    draws = [res["ranking"] for _ in range(n // 1000)
             for res in rank_one(client, tenant, {"requests": [request] * 1000}).json()["results"]]
    first = {x[0]["id"]: x[0]["probability"] for x in draws}
    assert len(first) == 5 and len(set(first.values())) > 1  # every candidate; not uniform
    for item, p in first.items():
        assert all(x[0]["probability"] == p for x in draws if x[0]["id"] == item)
        freq = np.mean([x[0]["id"] == item for x in draws])
        assert abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-3, (item, freq, p)
    top = max(first, key=first.__getitem__)  # slot 1 given the most likely slot 0
    given = [x for x in draws if x[0]["id"] == top]
    second = {x[1]["id"]: x[1]["probability"] for x in given}
    for item, p in second.items():
        freq = np.mean([x[1]["id"] == item for x in given])
        assert abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / len(given)) + 1e-3, (item, freq, p)


def test_rank_and_feedback_over_the_websocket(client: TestClient, tenant: dict[str, str]) -> None:
    new_ranker(client, tenant)
    rng = np.random.default_rng(4)
    with client.websocket_connect("/v1/models/feed/stream", headers=tenant) as ws:
        ws.send_json({"op": "rank", "id": 1, "features": [1, 0, 0], "actions": candidates(4, rng)})
        ws.send_json({"op": "rank", "id": 2, "features": [1, 0, 0], "actions": []})
        ranked = ws.receive_json()
        bad = ws.receive_json()
        assert ranked["id"] == 1 and len(ranked["result"]["ranking"]) == 3, ranked
        assert bad["error"]["field"] == "actions", bad
        event = {"event_id": ranked["result"]["event_id"],
                 "clicks": [ranked["result"]["ranking"][2]["id"]]}
        ws.send_json({"op": "feedback", "id": 3, **event})
        ws.send_json({"op": "feedback", "id": 4, **event})
        assert ws.receive_json()["result"] == {"accepted": True}
        assert ws.receive_json()["error"]["code"] == "duplicate_feedback"
