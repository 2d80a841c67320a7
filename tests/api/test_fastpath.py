"""The one-round-trip single predict (ASGI fast path, cached key and learner, guarded Lua log).

Which path answered is read from ``noisyloop_predict_requests_total{path}``;
what was logged, from Redis itself.  Every change that must void the caches
(revoked key, new snapshot, new noise rates, deleted or re-created model) is
made through the API and checked to take effect on the very next predict.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis

from app.api.fastbody import single_predict_body
from app.store.keys import ModelKeys
from tests.api import fastpaths
from tests.api.conftest import ADMIN, TestClient, make_client, new_model, new_tenant

X = [1.0, 0.0, 0.5, 0]
PREDICT = "/v1/models/m1/predict"


def paths(client: TestClient) -> dict[str, float]:
    """``noisyloop_predict_requests_total`` by path."""
    return fastpaths.paths(client, "predict")


def predicted_by(client: TestClient, auth: dict[str, str], body: Any = None,
                 **kwargs: Any) -> tuple[Any, str | None]:
    """POST a predict; return the response and the path that answered it (None: neither)."""
    return fastpaths.answered_by(client, PREDICT, "predict", auth,
                                 {"features": X} if body is None else body, **kwargs)


@pytest.fixture
def tenant(idle_client: TestClient) -> dict[str, str]:
    auth = new_tenant(idle_client)
    new_model(idle_client, auth)
    return auth


@pytest.mark.slow
def test_second_predict_takes_one_round_trip(idle_client: TestClient, redis_url: str,
                                             tenant: dict[str, str]) -> None:
    first, path1 = predicted_by(idle_client, tenant)
    second, path2 = predicted_by(idle_client, tenant)
    assert (path1, path2) == ("regular", "one_round_trip")
    assert first.status_code == second.status_code == 200
    assert first.json().keys() == second.json().keys() >= {"label", "event_id", "model_version"}
    assert second.headers["content-type"] == "application/json"
    assert second.headers["x-request-id"]
    # the one-round-trip decision is logged like any other: feedback joins it
    mk = ModelKeys("acme", "m1")
    with redis.Redis.from_url(redis_url) as r:
        assert r.zscore(mk.pending, second.json()["event_id"]) is not None
        assert r.hget(mk.stats, "predictions") == b"2"
    fb = idle_client.post("/v1/models/m1/feedback",
                          json={"event_id": second.json()["event_id"], "click": True},
                          headers=tenant)
    assert fb.status_code == 202
    # counted under the route template, like the regular path
    assert 'route="/v1/models/{model_id}/predict",status="200"} 2.0' in \
        idle_client.get("/metrics", headers=ADMIN).text


@pytest.mark.slow
def test_explore_false_counts_without_logging(idle_client: TestClient, redis_url: str,
                                              tenant: dict[str, str]) -> None:
    predicted_by(idle_client, tenant)
    r, path = predicted_by(idle_client, tenant, {"features": X, "explore": False})
    assert path == "one_round_trip" and "event_id" not in r.json()
    mk = ModelKeys("acme", "m1")
    with redis.Redis.from_url(redis_url) as conn:
        assert conn.hget(mk.stats, "predictions") == b"2"
        assert conn.zcard(mk.pending) == 1


def test_revoked_key_is_refused_at_once(idle_client: TestClient, tenant: dict[str, str]
                                        ) -> None:
    predicted_by(idle_client, tenant)
    fastpaths.revoke_key(idle_client, tenant)
    r, path = predicted_by(idle_client, tenant)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert path is None


def test_wrong_secret_of_a_cached_key_is_refused(idle_client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    predicted_by(idle_client, tenant)
    token = tenant["Authorization"]
    forged = {"Authorization": token[:-2] + ("AA" if not token.endswith("AA") else "BB")}
    r, path = predicted_by(idle_client, forged)
    assert r.status_code == 401 and path is None


def test_other_tenant_key_gets_404_like_a_missing_model(idle_client: TestClient,
                                                        tenant: dict[str, str]) -> None:
    other = new_tenant(idle_client, "other")
    predicted_by(idle_client, tenant)
    r, path = predicted_by(idle_client, other)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    assert path is None


@pytest.mark.slow
@pytest.mark.parametrize("change", ["reset", "noise", "recreate"])
def test_a_changed_model_is_seen_on_the_next_predict(idle_client: TestClient,
                                                     tenant: dict[str, str], change: str) -> None:
    first, _ = predicted_by(idle_client, tenant)
    _, warm = predicted_by(idle_client, tenant)
    assert warm == "one_round_trip"
    if change == "reset":
        assert idle_client.post("/v1/models/m1/reset", headers=tenant).status_code == 200
        expected_version = first.json()["model_version"] + 1
    elif change == "noise":
        assert idle_client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2},
                               headers=tenant).status_code == 200
        expected_version = first.json()["model_version"]
    else:
        assert idle_client.delete("/v1/models/m1", headers=tenant).status_code == 204
        r, path = predicted_by(idle_client, tenant)
        assert r.status_code == 404 and path is None
        new_model(idle_client, tenant, n_features=4)
        expected_version = 1
    r, path = predicted_by(idle_client, tenant)
    assert r.status_code == 200 and path == "regular"
    assert r.json()["model_version"] == expected_version
    _, path = predicted_by(idle_client, tenant)
    assert path == "one_round_trip"


def test_a_snapshot_published_by_another_process_is_seen(idle_client: TestClient,
                                                         tenant: dict[str, str],
                                                         redis_url: str) -> None:
    """A second app (another API replica) resets the model: the first one's cache is stale."""
    predicted_by(idle_client, tenant)
    with make_client(redis_url, trainer=False) as replica:
        assert replica.post("/v1/models/m1/reset", headers=tenant).status_code == 200
    r, path = predicted_by(idle_client, tenant)
    assert path == "regular" and r.json()["model_version"] == 2


@pytest.mark.parametrize("body,status", [
    ({"features": [1, 2, 3]}, 422),                 # wrong length
    ({"features": [True, 0, 0, 0]}, 422),           # a boolean is not a number
    ({"features": X, "extra": 1}, 422),             # unknown field
    ({"features": X, "explore": "maybe"}, 422),
    ({"features": X, "explore": "yes"}, 422),       # strict: a string is not a boolean
    ({"features": X, "explore": 0}, 422),           # nor is a number
    ({"instances": [X, X]}, 200),                   # a batch
    ({"features": {"indices": [0], "values": [1.0]}}, 200),
])
def test_other_bodies_are_validated_by_the_route(idle_client: TestClient,
                                                 tenant: dict[str, str],
                                                 body: dict[str, Any], status: int) -> None:
    """The ASGI fast path passes them on; the route validates them as it always did and then
    still predicts in one round trip (its cached path takes any validated body)."""
    predicted_by(idle_client, tenant)
    r, path = predicted_by(idle_client, tenant, body)
    assert r.status_code == status
    assert path == ("one_round_trip" if status == 200 else None)
    if status == 422:
        assert r.json()["error"]["field"]


def test_non_json_content_type_goes_to_the_regular_route(idle_client: TestClient,
                                                         tenant: dict[str, str]) -> None:
    predicted_by(idle_client, tenant)
    r = idle_client.post(PREDICT, content=b'{"features": [1, 0, 0, 0]}',
                         headers={**tenant, "Content-Type": "text/plain"})
    # the route answers: 415 saying what to send
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"


def test_no_content_type_is_read_as_json(idle_client: TestClient,
                                          tenant: dict[str, str]) -> None:
    predicted_by(idle_client, tenant)
    before = paths(idle_client)
    r = idle_client.post(PREDICT, content=b'{"features": [1, 0, 0, 0]}', headers=tenant)
    assert r.status_code == 200 and "label" in r.json()
    after = paths(idle_client)
    assert after["one_round_trip"] == before.get("one_round_trip", 0) + 1


def test_rate_limited_service_takes_the_regular_path(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, rate_limit_per_second=1000,
                     rate_limit_burst=1000) as client:
        auth = new_tenant(client)
        new_model(client, auth)
        assert [predicted_by(client, auth)[1] for _ in range(2)] == ["regular", "regular"]


def test_websocket_predicts_take_one_round_trip(idle_client: TestClient,
                                                tenant: dict[str, str]) -> None:
    with idle_client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        for i in range(3):
            ws.send_json({"op": "predict", "id": i, "features": X})
            assert "label" in ws.receive_json()["result"]
    assert paths(idle_client) == {"regular": 1.0, "one_round_trip": 2.0}


@pytest.mark.parametrize("body", [
    b'{"features": [1, 2.5]}', b'{"explore": true, "features": []}',
    b'{"features": [-0.0, 1e300], "explore": false}',
])
def test_single_predict_body_accepts_exactly_the_simple_shape(body: bytes) -> None:
    request = single_predict_body(body)
    assert request is not None and not request.batch and request.candidates is None


@pytest.mark.parametrize("body", [
    b'{"features": [1, null]}', b'{"features": [1, "2"]}', b'{"features": [[1]]}',
    b'{"features": [1], "explore": 1}', b'{"features": [1], "instances": [[1]]}',
    b'{"features": [123456789012345678901]}', b'{"features": [1]} x', b'',
    b'{"features": {"named": {"a": 1}}}', b'"features"',
])
def test_single_predict_body_refuses_anything_else(body: bytes) -> None:
    assert single_predict_body(body) is None


def test_fast_path_answers_without_the_app_and_passes_the_rest_on_intact(
        idle_client: TestClient, tenant: dict[str, str]) -> None:
    predicted_by(idle_client, tenant)  # the regular path fills the caches
    sent, inner = fastpaths.call_fast_path(idle_client, b'{"features": [1, 0, 0.5, 0]}', tenant,
                                         PREDICT)
    assert inner == [] and sent[0]["status"] == 200
    assert dict(sent[0]["headers"]).keys() == {b"content-type", b"content-length",
                                               b"x-request-id"}
    assert orjson.loads(sent[1]["body"]).keys() >= {"label", "event_id", "model_version"}
    odd = b'{"features": [1, 0, 0.5, 0], "explore": "yes"}'
    sent, inner = fastpaths.call_fast_path(idle_client, odd, tenant, PREDICT)
    assert inner == [odd] and sent[0]["status"] == 299
