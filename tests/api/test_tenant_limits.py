"""What one tenant may hold: each limit refuses with a 409 naming its setting and counts
``tenant_limit_reached``; other tenants are not held back."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tests.api.conftest import make_client, new_model, new_tenant


def _reached(registry: CollectorRegistry, tenant: str, limit: str) -> float:
    return registry.get_sample_value("noisyloop_tenant_limit_reached_total",
                                     {"tenant": tenant, "limit": limit}) or 0.0


def test_models_per_tenant_limit_refuses_the_next_create(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_models_per_tenant=2) as client:
        acme, other = new_tenant(client), new_tenant(client, "other")
        for name in ("m1", "m2"):
            new_model(client, acme, model_id=name)
        r = client.post("/v1/models", headers=acme, json={
            "model_id": "m3", "task": "label", "algorithm": "rcnbf", "n_features": 4,
            "n_classes": 3})
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert error["code"] == "limit_reached" and error["field"] == "model_id"
        assert "max_models_per_tenant" in error["message"]
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_models_per_tenant") == 1
        new_model(client, other, model_id="m3")  # another tenant is not held back
        assert client.delete("/v1/models/m1", headers=acme).status_code == 204
        new_model(client, acme, model_id="m3")  # room again


def test_challengers_per_model_limit_is_the_setting(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_challengers_per_model=1) as client:
        acme = new_tenant(client)
        new_model(client, acme, n_features=4, n_classes=3)
        add = {"name": "a", "algorithm": "banditron"}
        assert client.post("/v1/models/m1/challengers", json=add,
                           headers=acme).status_code == 201
        r = client.post("/v1/models/m1/challengers", json={**add, "name": "b"}, headers=acme)
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "too_many_challengers"
        assert "max_challengers_per_model" in r.json()["error"]["message"]
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_challengers_per_model") == 1
        listed = client.get("/v1/models/m1/challengers", headers=acme).json()
        assert listed["max_challengers"] == 1
