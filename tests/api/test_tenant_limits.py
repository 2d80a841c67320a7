"""What one tenant may hold: each limit refuses with a 409 naming its setting and counts
``tenant_limit_reached``; other tenants are not held back."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from tests.api.conftest import make_client, new_model, new_tenant


def _reached(registry: CollectorRegistry, tenant: str, limit: str) -> float:
    return registry.get_sample_value("noisyloop_tenant_limit_reached_total",
                                     {"tenant": tenant, "limit": limit}) or 0.0


def _refusal(r: Any, status: int, limit: str) -> dict[str, Any]:
    """The error of ``r``, a ``status`` limit_reached naming the setting ``limit``."""
    assert r.status_code == status, r.text
    error: dict[str, Any] = r.json()["error"]
    assert error["code"] == "limit_reached" and limit in error["message"]
    return error


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


def test_pending_per_model_limit_refuses_decisions_past_it(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_pending_per_model=3) as client:
        acme = new_tenant(client)
        new_model(client, acme)
        batch = client.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0]] * 2},
                            headers=acme)
        assert batch.status_code == 200, batch.text
        one = {"features": [1, 0, 0, 0]}
        assert client.post("/v1/models/m1/predict", json=one, headers=acme).status_code == 200
        for body in (one, {"instances": [[1, 0, 0, 0]]}):  # the one-round-trip path, a batch
            r = client.post("/v1/models/m1/predict", json=body, headers=acme)
            _refusal(r, 429, "max_pending_per_model")
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_pending_per_model") == 2  # once per refusal
        unlogged = client.post("/v1/models/m1/predict", json={**one, "explore": False},
                               headers=acme)
        assert unlogged.status_code == 200, unlogged.text  # not logged: not held
        event_id = batch.json()["predictions"][0]["event_id"]
        fed = client.post("/v1/models/m1/feedback", json={"event_id": event_id, "click": True},
                          headers=acme)
        assert fed.status_code in (200, 202), fed.text
        assert client.post("/v1/models/m1/predict", json=one, headers=acme).status_code == 200


def test_context_bytes_limit_refuses_a_wide_decision(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_context_bytes=1024) as client:
        acme = new_tenant(client)
        new_model(client, acme, n_features=200)  # a dense context of 1,600 bytes and more
        r = client.post("/v1/models/m1/predict", json={"features": [1.0] * 200}, headers=acme)
        assert r.status_code == 413, r.text
        error = r.json()["error"]
        assert error["code"] == "limit_reached" and "max_context_bytes" in error["message"]
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_context_bytes") == 1
        new_model(client, acme, model_id="m2")
        assert client.post("/v1/models/m2/predict", json={"features": [1, 0, 0, 0]},
                           headers=acme).status_code == 200


def test_body_bytes_limit_names_the_setting_and_counts_the_tenant(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_body_bytes=1024) as client:
        acme = new_tenant(client)
        new_model(client, acme)
        body = {"instances": [[1.0, 0.0, 0.0, 0.0]] * 100}  # about 2 KB
        for auth in (acme, {"Authorization": "Bearer not-a-key"}, {}):
            r = client.post("/v1/models/m1/predict", json=body, headers=auth)
            assert r.status_code == 413, r.text
            error = r.json()["error"]
            assert error["code"] == "payload_too_large"
            assert "max_body_bytes" in error["message"]
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_body_bytes") == 1  # only the valid key's


def test_evaluation_bytes_limit_refuses_a_too_wide_reward_model(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_evaluation_bytes=2**20) as client:
        acme = new_tenant(client)
        new_model(client, acme)  # 2 folds x 3 labels x 4 x 4 float64: 768 bytes
        new_model(client, acme, model_id="wide", n_features=200)  # 7.7 MB > 1 MiB
        ok = client.post("/v1/models/m1/evaluations", json={"policy": "uniform"}, headers=acme)
        assert ok.status_code == 202, ok.text
        r = client.post("/v1/models/wide/evaluations", json={"policy": "uniform"},
                        headers=acme)
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "limit_reached" and "max_evaluation_bytes" in error["message"]
        assert error["field"] == "policy"
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_evaluation_bytes") == 1


def test_evaluation_bytes_limit_admits_a_wide_model_hashed(redis_url: str) -> None:
    """A model of 100,000 features fits its reward model on 512 hashed buckets
    (2 folds x 3 labels x 512^2 float64: 12 MiB), under the default 2 GiB; 4,096
    features fitted as they are with 40 labels (10 GiB) still pass it."""
    with make_client(redis_url, trainer=False) as client:
        acme = new_tenant(client)
        new_model(client, acme, model_id="wide", n_features=100_000)
        r = client.post("/v1/models/wide/evaluations", json={"policy": "uniform"},
                        headers=acme)
        assert r.status_code == 202, r.text
        new_model(client, acme, model_id="labels", n_features=4096, n_classes=40)
        r = client.post("/v1/models/labels/evaluations", json={"policy": "uniform"},
                        headers=acme)
        assert r.status_code == 422, r.text
        assert "max_evaluation_bytes" in r.json()["error"]["message"]


def test_queued_evaluations_limit_refuses_the_next_until_one_starts(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, max_queued_evaluations_per_model=2) as client:
        acme = new_tenant(client)
        new_model(client, acme)
        new_model(client, acme, model_id="m2")
        queue = {"policy": "uniform"}
        for _ in range(2):
            ok = client.post("/v1/models/m1/evaluations", json=queue, headers=acme)
            assert ok.status_code == 202, ok.text
        r = client.post("/v1/models/m1/evaluations", json=queue, headers=acme)
        _refusal(r, 429, "max_queued_evaluations_per_model")
        registry = client.app.state.ctx.metrics.registry
        assert _reached(registry, "acme", "max_queued_evaluations_per_model") == 1
        other = client.post("/v1/models/m2/evaluations", json=queue, headers=acme)
        assert other.status_code == 202, other.text  # another model is not held back
        jobs = client.app.state.ctx.store.evaluations.jobs
        taken = client.portal.call(jobs.take, "w1", 60.0)  # the oldest starts
        assert taken is not None and taken.model == "m1"
        again = client.post("/v1/models/m1/evaluations", json=queue, headers=acme)
        assert again.status_code == 202, again.text  # room again
        refused = client.post("/v1/models/m1/evaluations", json=queue, headers=acme)
        assert refused.status_code == 429, refused.text
