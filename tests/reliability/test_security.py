"""Security promises: hashed keys, admin token, tenant isolation on every route of the
OpenAPI schema, unguessable event ids, per-tenant rate limits, CORS off, no secrets in logs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis

from app.logs import JsonFormatter
from app.store import keys
from app.tasks import TASKS
from tests.api.conftest import TestClient, make_client
from tests.reliability.conftest import ADMIN, ADMIN_TOKEN, setup_model, setup_tenant, task_body

PUBLIC = {"/healthz", "/readyz"}


@pytest.fixture
def api(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url, trainer=False) as c:
        yield c


def operations(api: TestClient) -> list[tuple[str, str]]:
    """Every (METHOD, path template) of the API's own OpenAPI schema."""
    paths = api.get("/openapi.json").json()["paths"]
    return sorted((m.upper(), p) for p, ops in paths.items() for m in ops)


def test_api_keys_stored_only_as_keyed_hashes(api: TestClient, redis_url: str) -> None:
    r = api.post("/v1/admin/tenants", json={"tenant_id": "acme"}, headers=ADMIN)
    api_key, key_id = r.json()["api_key"], r.json()["key_id"]
    secret = api_key.rsplit(".", 1)[1]
    assert len(base64.urlsafe_b64decode(secret + "==")) * 8 >= 256
    with redis.Redis.from_url(redis_url) as db:
        dump = b"".join(k + b"".join(v if isinstance(v, bytes) else b""
                                     for v in (db.hgetall(k) or {}).values())
                        if db.type(k) == b"hash" else k for k in db.keys("*"))
        assert secret.encode() not in dump and api_key.encode() not in dump
        record = db.hgetall(keys.api_key(key_id))
    assert set(record) >= {b"tenant", b"salt", b"hash"}
    assert record[b"hash"] == hmac.new(record[b"salt"], secret.encode(), hashlib.sha256).digest()
    # a wrong secret, another tenant's name, a revoked key: 401
    auth = {"Authorization": f"Bearer {api_key}"}
    assert api.get("/v1/models", headers=auth).status_code == 200
    for bad in (api_key[:-2] + "xx", api_key.replace("nl.acme.", "nl.other.")):
        r = api.get("/v1/models", headers={"Authorization": f"Bearer {bad}"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert api.delete(f"/v1/admin/tenants/acme/keys/{key_id}", headers=ADMIN).status_code == 204
    assert api.get("/v1/models", headers=auth).status_code == 401


@pytest.mark.slow
def test_admin_token_required_on_every_admin_route(api: TestClient) -> None:
    tenant = setup_tenant(api)
    admin_ops = [(m, p) for m, p in operations(api) if p.startswith("/v1/admin")]
    assert len(admin_ops) >= 5
    for method, template in admin_ops:
        path = template.replace("{tenant_id}", "acme").replace("{key_id}", "0123456789abcdef")
        body = {"tenant_id": "newco"} if (method, template) == ("POST", "/v1/admin/tenants") \
            else None
        for headers in ({}, tenant, {"Authorization": "Bearer " + ADMIN_TOKEN[:-1] + "x"},
                        {"Authorization": ADMIN_TOKEN}):
            r = api.request(method, path, json=body, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.text)
    assert api.get("/v1/admin/tenants", headers=ADMIN).json()["tenants"][0]["tenant_id"] == "acme"


def _a_state(api: TestClient, auth: dict[str, str], model_ids: list[str]) -> list[Any]:
    out = []
    for m in model_ids:
        model = api.get(f"/v1/models/{m}", headers=auth).json()
        snap = api.get(f"/v1/models/{m}/snapshot", headers=auth).json()
        model["stats"].pop("predictions")
        out.append((model["version"], model["stats"], model.get("noise"), snap["state"]))
    return out


@pytest.mark.slow
def test_foreign_key_on_every_route_of_the_schema(api: TestClient) -> None:
    """B's answer for A's model equals B's answer for a model that exists nowhere, and A's
    models are unchanged; a new route of the schema is covered without editing this test."""
    a, b = setup_tenant(api, "alpha"), setup_tenant(api, "beta")
    a_models = ["m1"] + [f"t-{task}" for task in TASKS]
    setup_model(api, a, "m1")
    for task in TASKS:
        setup_model(api, a, f"t-{task}", **task_body(task))
    eid = api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                   headers=a).json()["event_id"]
    snap = api.get("/v1/models/m1/snapshot", headers=a).json()
    bodies: dict[tuple[str, str], Any] = {
        ("POST", "/v1/models/{model_id}/predict"): {"features": [1, 0, 0, 0]},
        ("POST", "/v1/models/{model_id}/feedback"): {"event_id": eid, "click": True},
        ("PUT", "/v1/models/{model_id}/snapshot"): snap,
        ("PUT", "/v1/models/{model_id}/noise"): {"rho0": 0.1, "rho1": 0.1},
        ("PUT", "/v1/models/{model_id}/confusion"): {"matrix": [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1],
                                                                [0.1, 0.1, 0.8]]},
    }
    before = _a_state(api, a, a_models)
    model_ops = [(m, p) for m, p in operations(api) if "{model_id}" in p]
    assert len(model_ops) >= 13
    past_validation = 0
    for method, template in model_ops:
        body = bodies.get((method, template))
        for model_id in a_models:
            answers = []
            for target in (model_id, "exists-nowhere"):
                r = api.request(method, template.replace("{model_id}", target), json=body,
                                headers=b)
                error = r.json().get("error", {}) if r.content else {}
                answers.append((r.status_code, error.get("code")))
            assert answers[0] == answers[1], (method, template, model_id, answers)
            assert not 200 <= answers[0][0] < 300 or template.endswith("/stream"), answers
            past_validation += answers[0] == (404, "unknown_model")
    assert past_validation >= len(model_ops)  # at least once per route beyond validation
    assert _a_state(api, a, a_models) == before
    # B's listing is empty; B's WebSocket on A's model: unknown_model; A's event still open
    assert api.get("/v1/models", headers=b).json()["models"] == []
    with api.websocket_connect("/v1/models/m1/stream", headers=b) as ws:
        assert ws.receive_json()["error"]["code"] == "unknown_model"
    assert api.post("/v1/models/m1/feedback", json={"event_id": eid, "click": True},
                    headers=a).status_code == 202


def test_event_ids_unguessable(api: TestClient) -> None:
    auth = setup_tenant(api)
    setup_model(api, auth, "m1")
    ids: list[str] = []
    for _ in range(2):
        r = api.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0]] * 1000},
                     headers=auth)
        ids += [p["event_id"] for p in r.json()["predictions"]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{24}", e) for e in ids)
    raw = np.array([list(base64.urlsafe_b64decode(e)) for e in ids], dtype=np.uint8)
    assert raw.shape[1] * 8 == 144  # 144 random bits
    bits = np.unpackbits(raw, axis=1).mean(axis=0)
    # every bit position is a fair coin: within 5 standard errors of 1/2
    assert np.all(np.abs(bits - 0.5) < 5 * np.sqrt(0.25 / len(ids))), bits


#: A token back every 1000 s: none comes back while the test runs, however slow the machine
#: (the test moves a bucket's clock itself, :func:`_elapse`).
SLOW_RATE = 0.001


def _elapse(redis_url: str, tenant: str, seconds: float) -> None:
    """Make ``seconds`` pass for ``tenant``'s token bucket: its last refill moved back (the
    bucket refills for the time since, on the Redis clock)."""
    with redis.Redis.from_url(redis_url) as r:
        bucket = keys.rate_bucket(tenant)
        ts = float(r.hget(bucket, "ts"))  # type: ignore[arg-type]
        r.hset(bucket, "ts", repr(ts - seconds * 1e6))


def test_rate_limit_429_with_retry_after(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, rate_limit_per_second=SLOW_RATE,
                     rate_limit_burst=3) as api:
        a, b = setup_tenant(api, "alpha"), setup_tenant(api, "beta")
        codes = [api.get("/v1/models", headers=a).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        r = api.get("/v1/models", headers=a)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["Retry-After"]) <= 1 / SLOW_RATE
        assert api.get("/v1/models", headers=b).status_code == 200  # per tenant
        _elapse(redis_url, "alpha", 2.5 / SLOW_RATE)  # two tokens back
        codes = [api.get("/v1/models", headers=a).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        c = setup_tenant(api, "gamma")
        setup_model(api, c, "m1")  # token 1
        with api.websocket_connect("/v1/models/m1/stream", headers=c) as ws:  # token 2
            replies = []
            for i in range(4):
                ws.send_json({"op": "predict", "id": i, "features": [1, 0, 0, 0]})
                replies.append(next(iter(ws.receive_json().keys() - {"id"})))
            ws.send_json({"op": "predict", "id": 9, "features": [1, 0, 0, 0]})
            assert ws.receive_json()["error"]["code"] == "rate_limited"  # socket stays open
        assert replies == ["result", "error", "error", "error"]


def test_rate_limit_off_by_default(api: TestClient) -> None:
    auth = setup_tenant(api)
    assert all(api.get("/v1/models", headers=auth).status_code == 200 for _ in range(50))


def test_cors_off_by_default_and_explicit_when_configured(api: TestClient,
                                                          redis_url: str) -> None:
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    for r in (api.options("/v1/models", headers=preflight),
              api.get("/healthz", headers={"Origin": "https://evil.example"})):
        assert not any(h.lower().startswith("access-control-") for h in r.headers), r.headers
    with make_client(redis_url, trainer=False, cors_origins=["https://ok.example"]) as c:
        ok = c.get("/healthz", headers={"Origin": "https://ok.example"})
        assert ok.headers["access-control-allow-origin"] == "https://ok.example"
        other = c.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_no_secrets_in_logs(api: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    r = api.post("/v1/admin/tenants", json={"tenant_id": "acme"}, headers=ADMIN)
    api_key = r.json()["api_key"]
    second = api.post("/v1/admin/tenants/acme/keys", headers=ADMIN).json()["api_key"]
    auth = {"Authorization": f"Bearer {api_key}"}
    setup_model(api, auth, "m1")
    eid = api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                   headers=auth).json()["event_id"]
    api.post("/v1/models/m1/feedback", json={"event_id": eid, "click": True}, headers=auth)
    api.post("/v1/models/m1/predict", json={"features": "bad"}, headers=auth)
    api.get("/v1/models", headers={"Authorization": f"Bearer {api_key}x"})
    api.get("/v1/admin/tenants", headers={"Authorization": f"Bearer {ADMIN_TOKEN}x"})
    with api.websocket_connect("/v1/models/m1/stream") as ws:
        ws.send_json({"op": "auth", "api_key": second})
        ws.send_json({"op": "predict", "id": 1, "features": [1, 0, 0, 0]})
        assert "result" in ws.receive_json()
    formatter = JsonFormatter()
    text = "\n".join(formatter.format(rec) + " " + repr(rec.__dict__) for rec in caplog.records)
    assert len(caplog.records) >= 8, "the flow should have been logged"
    for secret in (api_key, api_key.rsplit(".", 1)[1], second.rsplit(".", 1)[1], ADMIN_TOKEN):
        assert secret not in text
