"""Health, readiness, metrics, OpenAPI, error shape, body limit, Redis outage and recovery."""

from __future__ import annotations

import time

import pytest

from app.main import create_app
from app.settings import Settings
from app.store.embedded import EmbeddedRedis
from tests.api.conftest import (
    ADMIN,
    ADMIN_TOKEN,
    TestClient,
    make_client,
    new_model,
    new_tenant,
)

METRIC_SERIES = ("http_requests_total", "http_request_duration_seconds", "predictions_total",
                 "feedback_total", "events_applied_total", "trainer_lag_seconds",
                 "model_version", "noise_rate", "debiased_reward")


@pytest.mark.slow
def test_health_ready_metrics(client: TestClient, tenant: dict[str, str]) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    new_model(client, tenant)
    p = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                    headers=tenant).json()
    client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": True},
                headers=tenant)
    client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2}, headers=tenant)
    client.post("/v1/models/m1/sync", headers=tenant)
    client.get("/v1/models/m1", headers=tenant)
    text = client.get("/metrics", headers=ADMIN).text
    for series in METRIC_SERIES:
        assert f"noisyloop_{series}" in text, series
    assert 'noisyloop_predictions_total{model="m1",tenant="acme"} 1.0' in text
    assert 'route="/v1/models/{model_id}/predict"' in text


METRICS_TOKEN = "prometheus-scrape-token-0123456789"


def test_metrics_name_no_tenant_or_model_without_the_metrics_credential(
        redis_url: str) -> None:
    """/metrics answers the metrics token or the admin token; without one (no header, a
    tenant's API key, a wrong token) a 401 that names nothing."""
    with make_client(redis_url, trainer=False, metrics_token=METRICS_TOKEN) as client:
        tenant = new_tenant(client)
        new_model(client, tenant)
        assert client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                           headers=tenant).status_code == 200
        for headers in ({}, tenant, {"Authorization": f"Bearer {METRICS_TOKEN}x"},
                        {"Authorization": f"Basic {METRICS_TOKEN}"}):
            r = client.get("/metrics", headers=headers)
            assert r.status_code == 401, headers
            assert r.json()["error"]["code"] == "invalid_metrics_token"
            assert "acme" not in r.text and "m1" not in r.text
        for token in (METRICS_TOKEN, ADMIN_TOKEN):
            r = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200
            assert 'noisyloop_predictions_total{model="m1",tenant="acme"} 1.0' in r.text
    with TestClient(create_app(Settings(redis_url=redis_url))) as client:
        assert client.get("/metrics").status_code == 401  # no token configured: nobody


def test_a_deleted_models_series_go_and_its_successor_counts_afresh(
        client: TestClient, tenant: dict[str, str]) -> None:
    """The kept series of a model (Metrics.count_decisions) go with it: a model created again
    under the same id counts from zero on series that are exported."""
    for _ in range(2):
        new_model(client, tenant)
        for _ in range(3):
            assert client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                               headers=tenant).status_code == 200
        text = client.get("/metrics", headers=ADMIN).text
        assert 'noisyloop_predictions_total{model="m1",tenant="acme"} 3.0' in text
        assert 'noisyloop_model_version{model="m1",tenant="acme"} 1.0' in text
        assert client.delete("/v1/models/m1", headers=tenant).status_code == 204
        assert 'model="m1"' not in client.get("/metrics", headers=ADMIN).text


def test_noise_get_put(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, params={"rho0": 0.05, "rho1": 0.1})
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (r["rho0"], r["rho1"], r["source"]) == (0.05, 0.1, "initial")
    r = client.put("/v1/models/m1/noise", json={"rho0": 0.2, "rho1": 0.3}, headers=tenant)
    assert r.status_code == 200 and r.json()["source"] == "configured"
    for bad in ({"rho0": 0.6, "rho1": 0.5}, {"rho0": -0.1, "rho1": 0.1}, {"rho0": 1, "rho1": 0}):
        assert client.put("/v1/models/m1/noise", json=bad, headers=tenant).status_code == 422
    # configured rates are not re-estimated by request either (rcnbf does not own the estimate)
    r = client.post("/v1/models/m1/noise/estimate", headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["code"] == "estimate_unavailable"


def test_openapi_describes_every_endpoint(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    expected = {
        ("post", "/v1/admin/tenants"), ("get", "/v1/admin/tenants"),
        ("delete", "/v1/admin/tenants/{tenant_id}"), ("post", "/v1/admin/tenants/{tenant_id}/keys"),
        ("delete", "/v1/admin/tenants/{tenant_id}/keys/{key_id}"),
        ("post", "/v1/models"), ("get", "/v1/models"), ("get", "/v1/models/{model_id}"),
        ("delete", "/v1/models/{model_id}"), ("post", "/v1/models/{model_id}/reset"),
        ("get", "/v1/models/{model_id}/snapshot"), ("put", "/v1/models/{model_id}/snapshot"),
        ("post", "/v1/models/{model_id}/sync"), ("post", "/v1/models/{model_id}/predict"),
        ("post", "/v1/models/{model_id}/feedback"), ("get", "/v1/models/{model_id}/noise"),
        ("put", "/v1/models/{model_id}/noise"), ("post", "/v1/models/{model_id}/noise/estimate"),
        ("get", "/v1/models/{model_id}/stream"), ("get", "/healthz"), ("get", "/readyz"),
        ("get", "/metrics"),
    }
    found = {(m, p) for p, ops in paths.items() for m in ops}
    assert expected <= found, expected - found
    for method, path in [("post", "/v1/models"), ("post", "/v1/models/{model_id}/predict"),
                         ("post", "/v1/models/{model_id}/feedback"),
                         ("put", "/v1/models/{model_id}/noise"),
                         ("post", "/v1/admin/tenants"), ("put", "/v1/models/{model_id}/snapshot")]:
        op = paths[path][method]
        assert "requestBody" in op, (method, path)
    for method, path in expected - {("get", "/metrics"), ("get", "/v1/models/{model_id}/stream")}:
        responses = paths[path][method]["responses"]
        ok = [c for c in responses if c.startswith("2")]
        if ok[0] == "204":
            continue
        assert "$ref" in str(responses[ok[0]]) or "schema" in str(responses[ok[0]]), (method, path)
    schemas = spec["components"]["schemas"]
    for name in ("PredictRequest", "LabelPrediction", "LabelSetPrediction", "LabelFeedback",
                 "FeedbackBatchRequest", "ModelResponse", "ErrorResponse"):
        assert name in schemas


def test_unknown_route_and_body_limit_use_error_shape(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_body_bytes=2048) as client:
        r = client.get("/v1/nothing")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        auth = new_tenant(client)
        r = client.post("/v1/models/m1/predict", json={"features": [0.0] * 2000}, headers=auth)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"


def test_deeply_nested_json_4xx(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    for depth in (1500, 100_000):
        r = client.post("/v1/models/m1/predict",
                        content=b'{"features": ' + b"[" * depth + b"]" * depth + b"}",
                        headers={**tenant, "Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, r.text
        assert set(r.json()["error"]) == {"code", "message", "field"}


def test_redis_outage_503_then_recovers(tmp_path) -> None:
    server = EmbeddedRedis(tmp_path / "r").start()
    try:
        with make_client(server.url, redis_socket_timeout=0.5,
                         redis_connect_timeout=0.5) as client:
            auth = new_tenant(client)
            new_model(client, auth)
            server.stop()
            start = time.monotonic()
            r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                            headers=auth)
            assert r.status_code == 503 and r.json()["error"]["code"] == "store_unavailable"
            assert r.headers["Retry-After"].isdigit()
            assert time.monotonic() - start < 3
            assert client.get("/readyz").status_code == 503
            assert client.get("/healthz").status_code == 200
            server.start()
            # recovers by itself (no restart of the app) within a few seconds
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                                headers=auth)
                if r.status_code == 200:
                    break
                time.sleep(0.1)
            assert r.status_code == 200, r.text
            assert client.get("/readyz").status_code == 200
            assert client.get("/v1/admin/tenants", headers=ADMIN).status_code == 200
    finally:
        server.stop()
