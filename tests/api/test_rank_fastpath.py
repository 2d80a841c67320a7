"""The one-round-trip dense rank (ASGI fast path, hand-checked body, guarded Lua log).

Which path answered is read from ``noisyloop_rank_requests_total{path}``;
what was logged, from Redis itself.  Every body the fast path does not take
must get exactly the regular route's answer: the 422s are compared with
those of a service whose caches are cold (so its regular route answers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
import redis

from app.api.fastbody import plain_rank_body
from app.store.keys import ModelKeys
from tests.api import fastpaths
from tests.api.conftest import ADMIN, TestClient, make_client, new_model, new_tenant
from tests.api.test_rank import candidates, new_ranker

RANK = "/v1/models/feed/rank"
MK = ModelKeys("acme", "feed")
ACTIONS = candidates(6, np.random.default_rng(0))
ONE = {"features": [1.0, 0.5, -0.25], "actions": ACTIONS}


def paths(client: TestClient) -> dict[str, float]:
    """``noisyloop_rank_requests_total`` by path."""
    return fastpaths.paths(client, "rank")


def ranked_by(client: TestClient, auth: dict[str, str], body: Any = None,
              **kwargs: Any) -> tuple[Any, str | None]:
    """POST a rank; return the response and the path that answered it (None: neither)."""
    return fastpaths.answered_by(client, RANK, "rank", auth, ONE if body is None else body,
                                 **kwargs)


@pytest.fixture
def tenant(idle_client: TestClient) -> dict[str, str]:
    auth = new_tenant(idle_client)
    new_ranker(idle_client, auth)
    return auth


def test_second_rank_takes_one_round_trip(idle_client: TestClient, redis_url: str,
                                          tenant: dict[str, str]) -> None:
    first, path1 = ranked_by(idle_client, tenant)
    second, path2 = ranked_by(idle_client, tenant)
    assert (path1, path2) == ("regular", "one_round_trip")
    assert first.status_code == second.status_code == 200
    assert first.json().keys() == second.json().keys() == {
        "event_id", "model_version", "ranking", "calibration_unreliable"}
    assert [r.keys() for r in first.json()["ranking"]] == \
        [r.keys() for r in second.json()["ranking"]]
    assert [r["slot"] for r in second.json()["ranking"]] == [0, 1, 2]
    assert second.headers["content-type"] == "application/json"
    assert second.headers["x-request-id"]
    with redis.Redis.from_url(redis_url) as r:
        assert r.zscore(MK.pending, second.json()["event_id"]) is not None
        assert r.hget(MK.stats, "predictions") == b"2"
    shown = second.json()["ranking"][0]["id"]
    fb = idle_client.post("/v1/models/feed/feedback",
                          json={"event_id": second.json()["event_id"], "clicks": [shown]},
                          headers=tenant)
    assert fb.status_code == 202, fb.text
    assert 'route="/v1/models/{model_id}/rank",status="200"} 2.0' in \
        idle_client.get("/metrics", headers=ADMIN).text


def test_batch_takes_one_round_trip_with_the_regular_answer_shape(
        idle_client: TestClient, redis_url: str, tenant: dict[str, str]) -> None:
    rng = np.random.default_rng(1)
    body = {"requests": [{"features": [1, 0, 0], "actions": candidates(4, rng)},
                         {"features": [1, 1, 0], "actions": candidates(2, rng), "slots": 1},
                         {"features": [0, 1, 0], "actions": candidates(5, rng),
                          "explore": False}]}
    first, path1 = ranked_by(idle_client, tenant, body)
    second, path2 = ranked_by(idle_client, tenant, body)
    assert (path1, path2) == ("regular", "one_round_trip")
    for r in (first, second):
        results = r.json()["results"]
        assert [len(x["ranking"]) for x in results] == [3, 1, 3]
        assert ["event_id" in x for x in results] == [True, True, False]
    # the greedy ranking is the same whichever path answered
    assert first.json()["results"][2] == second.json()["results"][2]
    with redis.Redis.from_url(redis_url) as r:
        assert r.hget(MK.stats, "predictions") == b"6"
        assert r.zcard(MK.pending) == 4


def test_explore_false_counts_without_logging(idle_client: TestClient, redis_url: str,
                                              tenant: dict[str, str]) -> None:
    ranked_by(idle_client, tenant)
    r, path = ranked_by(idle_client, tenant, {**ONE, "explore": False})
    assert path == "one_round_trip" and "event_id" not in r.json()
    assert {x["probability"] for x in r.json()["ranking"]} == {1.0}
    with redis.Redis.from_url(redis_url) as conn:
        assert conn.hget(MK.stats, "predictions") == b"2"
        assert conn.zcard(MK.pending) == 1


def test_deferred_ranking_takes_one_round_trip_and_waits_for_activation(
        idle_client: TestClient, tenant: dict[str, str]) -> None:
    ranked_by(idle_client, tenant)
    r, path = ranked_by(idle_client, tenant, {**ONE, "defer": True})
    assert path == "one_round_trip", r.text
    event = r.json()["event_id"]
    early = idle_client.post("/v1/models/feed/feedback",
                             json={"event_id": event, "clicks": []}, headers=tenant)
    assert early.status_code == 409 and early.json()["error"]["code"] == "not_activated"
    assert idle_client.post(f"/v1/models/feed/events/{event}/activate",
                            headers=tenant).status_code == 200
    # a batch mixing defer values is logged in two steps: the regular path takes it
    mixed = {"requests": [{**ONE, "defer": True}, ONE]}
    r, path = ranked_by(idle_client, tenant, mixed)
    assert r.status_code == 200 and path == "regular"


def test_apprentice_baselines_take_the_regular_path(idle_client: TestClient,
                                                    tenant: dict[str, str]) -> None:
    new_ranker(idle_client, tenant, model_id="appr", mode="apprentice")
    url = "/v1/models/appr/rank"
    baseline = ["item-4", "item-2", "item-0"]
    for _ in range(2):
        r = idle_client.post(url, json={**ONE, "baseline": baseline}, headers=tenant)
        assert [a["id"] for a in r.json()["ranking"]] == baseline
    # a plain body (no baseline) to a model in apprentice mode: the regular path's 422
    before = paths(idle_client)
    r = idle_client.post(url, json=ONE, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "baseline"
    assert paths(idle_client) == before
    # an online model ignores a baseline (the regular path answers)
    ranked_by(idle_client, tenant)
    r, path = ranked_by(idle_client, tenant, {**ONE, "baseline": ["item-1"]})
    assert r.status_code == 200 and path == "regular"


def test_revoked_key_is_refused_at_once(idle_client: TestClient, tenant: dict[str, str]
                                        ) -> None:
    ranked_by(idle_client, tenant)
    fastpaths.revoke_key(idle_client, tenant)
    r, path = ranked_by(idle_client, tenant)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert path is None


def test_a_reset_model_is_seen_on_the_next_rank(idle_client: TestClient,
                                                tenant: dict[str, str]) -> None:
    first, _ = ranked_by(idle_client, tenant)
    assert ranked_by(idle_client, tenant)[1] == "one_round_trip"
    assert idle_client.post("/v1/models/feed/reset", headers=tenant).status_code == 200
    r, path = ranked_by(idle_client, tenant)
    assert path == "regular" and r.json()["model_version"] == first.json()["model_version"] + 1
    assert ranked_by(idle_client, tenant)[1] == "one_round_trip"


def test_rank_of_a_cached_label_model_gets_the_regular_422(idle_client: TestClient,
                                                           tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant)
    for _ in range(2):
        assert idle_client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                                headers=tenant).status_code == 200
    r = idle_client.post("/v1/models/m1/rank", json=ONE, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["code"] == "wrong_task"


_TWO = [{"id": "a", "features": [0, 0]}, {"id": "b", "features": [1, 0]}]


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"features": [1, 0], "actions": _TWO}, 422, "features"),
    ({"features": [1, 0, 0], "actions": [_TWO[0], {"id": "b", "features": [0, 0, 1]}]},
     422, "actions[1].features"),
    ({"features": [1, 0, 0], "actions": [*_TWO, {"id": "a", "features": [0, 1]}]},
     422, "actions[2].id"),
    ({"features": [1, 0, 0], "actions": [{"id": "", "features": [0, 0]}]}, 422,
     "actions[0].id"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [True, 0]}]}, 422,
     "actions[0].features[0]"),
    ({"features": [1, 0, "0"], "actions": _TWO}, 422, "features[2]"),
    ({"features": [1, 0, 0], "actions": []}, 422, "actions"),
    ({"features": [1, 0, 0], "actions": _TWO, "slots": 4}, 422, "slots"),
    ({"features": [1, 0, 0], "actions": _TWO, "slots": 0}, 422, "slots"),
    ({"features": [1, 0, 0], "actions": _TWO, "slots": True}, 422, "slots"),
    ({"features": [1, 0, 0], "actions": _TWO, "explore": "no"}, 422, "explore"),
    ({"features": [1, 0, 0], "actions": _TWO, "explore": False, "defer": True}, 422, "defer"),
    ({"features": [1, 0, 0], "actions": _TWO, "extra": 1}, 422, "extra"),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": [1e300, 1e300]}]}, 422,
     "actions[0].features"),
    ({"requests": [{"features": [1, 0, 0], "actions": _TWO},
                   {"features": [1, 0, 0], "actions": [{"id": "a", "features": [0]}]}]},
     422, "requests[1].actions[0].features"),
    ({"requests": [{"features": [1, 0, 0], "actions": _TWO},
                   {"features": [1, 0, 0], "actions": [*_TWO, _TWO[0]]}]},
     422, "requests[1].actions[2].id"),
    ({"features": [1, 0, 0], "actions": _TWO, "slots": 2.0}, 200, None),
    ({"features": {"indices": [0], "values": [1.0]}, "actions": _TWO}, 200, None),
    ({"features": [1, 0, 0], "actions": [{"id": "a", "features": {"named": {"x": 1}}}]},
     200, None),
])
def test_other_bodies_get_the_regular_answer(idle_client: TestClient, redis_url: str,
                                             tenant: dict[str, str], body: dict[str, Any],
                                             status: int, field: str | None) -> None:
    """The fast path passes them on with the caches warm: the same answer as a service whose
    regular route validates them (caches cold)."""
    ranked_by(idle_client, tenant)
    r, path = ranked_by(idle_client, tenant, body)
    assert r.status_code == status, r.text
    assert path == ("regular" if status == 200 else None)
    if status == 422:
        assert r.json()["error"]["field"] == field
        with make_client(redis_url, trainer=False) as cold:
            again = cold.post(RANK, json=body, headers=tenant)
        assert again.json() == r.json()


@pytest.mark.parametrize("body", [
    b'{"features": [1, 2.5], "actions": [{"id": "a", "features": [1]}]}',
    b'{"requests": [{"features": [1], "actions": [{"features": [1], "id": "b"}], '
    b'"slots": 2, "explore": false, "defer": false}]}',
    b'{"defer": true, "actions": [{"id": "a", "features": []}], "features": [-0.0, 1e300]}',
    b'{"features": [123456789012345678901], "actions": [{"id": "a", "features": [1]}]}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1]}, '
    b'{"id": "b", "features": [1, 2]}]}',  # ragged: the model's widths are checked after
])
def test_plain_rank_body_accepts_exactly_the_plain_shape(body: bytes) -> None:
    plain = plain_rank_body(body, 32)
    assert plain is not None and len(plain.contexts) == 1 and plain.candidates is not None
    doc = orjson.loads(body)
    one = doc["requests"][0] if "requests" in doc else doc
    assert plain.contexts[0] == [float(v) for v in one["features"]]
    assert plain.candidates[0].ids == [a["id"] for a in one["actions"]]


@pytest.mark.parametrize("body", [
    b'{"features": [1, null], "actions": [{"id": "a", "features": [1]}]}',
    b'{"features": [1], "actions": [{"id": "a", "features": ["1"]}]}',
    b'{"features": [1], "actions": [{"id": 1, "features": [1]}]}',
    b'{"features": [1], "actions": [{"id": "a", "features": [[1]]}]}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1], "x": 0}]}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1]}], "slots": null}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1]}], "slots": 123456789012345678901}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1]}], "baseline": ["a"]}',
    b'{"requests": [{"features": [1], "actions": [{"id": "a", "features": [1]}]}], "x": 1}',
    b'{"requests": [{"features": [1], "actions": [{"id": "a", "features": [1]}]}, []]}',
    b'{"features": [1], "actions": [{"id": "a", "features": [1]}]} x', b'', b'"features"',
])
def test_plain_rank_body_refuses_anything_else(body: bytes) -> None:
    assert plain_rank_body(body, 32) is None


def test_fast_path_reads_a_body_of_several_parts(idle_client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    ranked_by(idle_client, tenant)
    body = orjson.dumps({"requests": [ONE] * 3})
    sent, inner = fastpaths.call_fast_path(idle_client, [body[:100], body[100:]], tenant,
                                           RANK)
    assert inner == [] and sent[0]["status"] == 200
    assert len(orjson.loads(sent[1]["body"])["results"]) == 3
    odd = [body[:100], body[100:-1] + b', "x": 1}']
    sent, inner = fastpaths.call_fast_path(idle_client, odd, tenant, RANK)
    assert inner == [b"".join(odd)] and sent[0]["status"] == 299


def test_a_batch_deeper_than_the_limit_gets_the_apps_answer(redis_url: str) -> None:
    """A batch nests 6 levels: under a limit of 5 the app refuses it, warm caches or not."""
    with make_client(redis_url, trainer=False, max_json_depth=5) as client:
        auth = new_tenant(client)
        new_ranker(client, auth)
        assert [ranked_by(client, auth)[1] for _ in range(2)] == ["regular", "one_round_trip"]
        r, path = ranked_by(client, auth, {"requests": [ONE]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "json_too_deep"
        assert path is None
        assert plain_rank_body(orjson.dumps({"requests": [ONE]}), 6) is not None
