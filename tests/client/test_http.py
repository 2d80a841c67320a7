"""The sync and async HTTP clients against the real service (every route of api.md)."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
import redis
from noisyloop_client import AsyncClient, Client, NoisyloopError, snapshot_arrays

from app.store.embedded import EmbeddedRedis
from app.store.keys import ModelKeys
from tests.client.conftest import Service


def _model(c: Client, model_id: str = "m1", **kw: object) -> None:
    c.create_model(model_id, "label", 4, algorithm="rcnbf", n_classes=3, seed=0,
                   **kw)  # type: ignore[arg-type]


def test_admin_tenant_and_key_lifecycle(service: Service, admin: Client) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    created = admin.create_tenant(tenant)
    assert created["tenant_id"] == tenant
    assert tenant in {t["tenant_id"] for t in admin.list_tenants()}
    with pytest.raises(NoisyloopError) as info:
        admin.create_tenant(tenant)
    assert (info.value.status, info.value.code) == (409, "tenant_exists")
    second = admin.create_key(tenant)
    admin.revoke_key(tenant, created["key_id"])
    with Client(service.url, created["api_key"]) as old, pytest.raises(NoisyloopError) as info:
        old.list_models()
    assert (info.value.status, info.value.code) == (401, "invalid_api_key")
    with Client(service.url, second["api_key"]) as new:
        assert new.list_models() == []
    admin.delete_tenant(tenant)
    with pytest.raises(NoisyloopError) as info:
        admin.delete_tenant(tenant)
    assert info.value.code == "unknown_tenant"


def test_predict_feedback_sync_loop(client: Client) -> None:
    _model(client)
    assert [m["model_id"] for m in client.list_models()] == ["m1"]
    one = client.predict("m1", [1.0, 0.0, 0.0, 0.0])
    sparse = client.predict("m1", {"indices": [1], "values": [1.0]})
    named = client.predict("m1", {"named": {"country=FR": 1, "age": 0.3}})
    batch = client.predict_batch("m1", np.eye(4))
    greedy = client.predict("m1", np.ones(4), explore=False)
    assert len(batch) == 4 and "event_id" not in greedy
    for p in (one, sparse, named, *batch):
        assert 0 <= p["label"] < 3 and 0 < p["probability"] <= 1
    assert client.feedback("m1", one["event_id"], click=True) == {"accepted": True}
    result = client.feedback_batch("m1", [
        {"event_id": sparse["event_id"], "click": False},
        {"event_id": "no-such-event", "click": True},
        {"event_id": named["event_id"], "click": True},
    ])
    assert result["accepted"] == 2
    assert [(r["index"], r["error"]["code"]) for r in result["rejected"]] == [
        (1, "unknown_event")]
    with pytest.raises(NoisyloopError) as info:
        client.feedback("m1", one["event_id"], click=False)
    assert (info.value.status, info.value.code) == (409, "duplicate_feedback")
    assert client.sync("m1", timeout=10)["pending"] == 0
    model = client.get_model("m1")
    assert model["stats"]["events_applied"] == 3
    assert model["stats"]["predictions"] >= 7


@pytest.mark.slow
def test_snapshot_reset_delete(client: Client) -> None:
    _model(client)
    p = client.predict("m1", [0.0, 1.0, 0.0, 0.0])
    client.feedback("m1", p["event_id"], click=True)
    client.sync("m1")
    snap = client.get_snapshot("m1")
    weights = snapshot_arrays(snap)["W_"]
    assert weights.shape == (3, 4) and np.abs(weights).sum() > 0
    reset = client.reset_model("m1")
    assert reset["version"] > snap["version"]
    assert np.abs(snapshot_arrays(client.get_snapshot("m1"))["W_"]).sum() == 0
    client.put_snapshot("m1", dict(snap))
    assert np.array_equal(snapshot_arrays(client.get_snapshot("m1"))["W_"], weights)
    client.delete_model("m1")
    with pytest.raises(NoisyloopError) as info:
        client.get_model("m1")
    assert (info.value.status, info.value.code) == (404, "unknown_model")


@pytest.mark.slow
def test_versions_and_rollback(client: Client) -> None:
    _model(client, versions={"kept": 5, "interval_seconds": 0})
    p = client.predict("m1", [0.0, 1.0, 0.0, 0.0])
    client.feedback("m1", p["event_id"], click=True)
    client.sync("m1")
    kept = client.versions("m1")
    assert [(v["version"], v["reason"], v["current"]) for v in kept["versions"]] == [
        (2, "trainer", True), (1, "create", False)]
    first = client.versions("m1", limit=1)
    assert [v["version"] for v in first["versions"]] == [2] and first["next_before"] == 2
    assert [v["version"] for v in client.versions("m1", before=2)["versions"]] == [1]
    assert client.rollback("m1", 1) == {"version": 3, "rolled_back_to": 1}
    assert np.abs(snapshot_arrays(client.get_snapshot("m1"))["W_"]).sum() == 0
    with pytest.raises(NoisyloopError) as info:
        client.rollback("m1", 7)
    assert (info.value.status, info.value.code, info.value.field) == (
        404, "unknown_version", "version")


def test_challengers_and_promote(client: Client) -> None:
    _model(client)
    listed = client.add_challenger("m1", "b", "banditron", {"gamma": 0.2})
    assert [(c["name"], c["status"]) for c in listed["challengers"]] == [("b", "waiting")]
    p = client.predict("m1", [0.0, 1.0, 0.0, 0.0])
    client.feedback("m1", p["event_id"], click=True)
    client.sync("m1")
    assert client.challengers("m1")["champion"]["algorithm"] == "rcnbf"
    promoted = client.promote("m1", "b")
    assert (promoted["algorithm"], promoted["params"]["gamma"]) == ("banditron", 0.2)
    assert client.get_model("m1")["algorithm"] == "banditron"
    assert [c["name"] for c in client.challengers("m1")["challengers"]] == ["previous"]
    client.delete_challenger("m1", "previous")
    with pytest.raises(NoisyloopError) as info:
        client.promote("m1", "previous")
    assert (info.value.status, info.value.code, info.value.field) == (
        404, "unknown_challenger", "challenger")


def test_noise_get_put(client: Client) -> None:
    _model(client)
    assert client.get_noise("m1")["source"] == "initial"
    noise = client.put_noise("m1", 0.1, 0.2)
    assert (noise["rho0"], noise["rho1"], noise["source"]) == (0.1, 0.2, "configured")
    with pytest.raises(NoisyloopError) as info:
        client.put_noise("m1", 0.6, 0.5)
    assert info.value.status == 422
    noise = client.put_noise("m1", estimator="fixed")
    assert (noise["rho0"], noise["estimator"]) == (0.1, "fixed")


def test_noise_put_sends_null_only_when_asked(client: Client) -> None:
    """``None`` for ``one_right_label`` and ``half_life`` sends ``null`` (the setting back);
    not giving them leaves what is in force."""
    _model(client)
    noise = client.put_noise("m1", one_right_label=False, half_life=5000, max_width=0.2)
    assert (noise["one_right_label"], noise["half_life"], noise["max_width"]) == (
        False, 5000, 0.2)
    noise = client.put_noise("m1", estimator="anchor")
    assert (noise["one_right_label"], noise["half_life"]) == (False, 5000)
    noise = client.put_noise("m1", one_right_label=None, half_life=None)
    assert (noise["one_right_label"], noise["half_life"]) == (True, None)


def test_validation_error_names_field(client: Client) -> None:
    _model(client)
    with pytest.raises(NoisyloopError) as info:
        client.predict("m1", [1.0, 2.0])
    assert info.value.status == 422 and info.value.field is not None
    with pytest.raises(NoisyloopError) as info:
        client.create_model("m2", "label", 4, algorithm="nope", n_classes=3)
    assert info.value.status == 422 and info.value.field == "algorithm"


async def test_async_client_loop(service: Service, api_key: str) -> None:
    async with AsyncClient(service.url, api_key) as c:
        await c.create_model("a1", "label_set", 4, n_classes=4, params={"m": 2}, seed=1)
        preds = await c.predict_batch("a1", [[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
        assert all(len(p["labels"]) == 2 for p in preds)
        result = await c.feedback_batch("a1", [{"event_id": p["event_id"], "click": True}
                                               for p in preds])
        assert result == {"accepted": 2, "rejected": []}
        assert (await c.sync("a1"))["pending"] == 0
        assert (await c.get_model("a1"))["stats"]["events_applied"] == 2
        assert (await c.health())["status"] == "ok"
        await c.delete_model("a1")
        assert await c.list_models() == []


@pytest.mark.slow
async def test_dead_letters_list_drop_retry(service: Service, client: Client, api_key: str,
                                            redis_server: EmbeddedRedis) -> None:
    _model(client)
    tenant = api_key.split(".")[1]
    with redis.Redis.from_url(redis_server.url) as r:
        for i in range(3):  # entries the trainer cannot decode
            r.xadd(ModelKeys(tenant, "m1").events, {"k": "feedback", "e": f"bad{i}"})
    assert client.sync("m1") == {"version": 1, "pending": 3, "dead_lettered": 3}
    page = client.list_dead_letters("m1", limit=2)
    assert page["total"] == 3 and [d["event_id"] for d in page["dead_letters"]] == ["bad0", "bad1"]
    rest = client.list_dead_letters("m1", after=page["next_after"])
    assert [d["event_id"] for d in rest["dead_letters"]] == ["bad2"]
    first = page["dead_letters"][0]["entry_id"]
    assert client.retry_dead_letter("m1", first)["entry_id"] == first
    client.drop_dead_letter("m1", page["dead_letters"][1]["entry_id"])
    with pytest.raises(NoisyloopError) as info:
        client.drop_dead_letter("m1", page["dead_letters"][1]["entry_id"])
    assert (info.value.status, info.value.code) == (404, "unknown_dead_letter")
    assert client.sync("m1")["dead_lettered"] == 2  # the retried one failed again
    async with AsyncClient(service.url, api_key) as ac:
        assert (await ac.list_dead_letters("m1"))["total"] == 2
        assert await ac.drop_dead_letters("m1") == 2
    stats = client.get_model("m1")["stats"]
    assert stats["events_dead_lettered"] == 0 and stats["dead_letters_dropped"] == 3


def test_rank_and_feedback_by_id(client: Client) -> None:
    client.create_model("feed", "rank", 3, n_action_features=2, slots=2, seed=0)
    actions = [{"id": f"item-{i}", "features": [float(i), 1.0]} for i in range(4)]
    one = client.rank("feed", [1.0, 0.0, 0.5], actions)
    assert [r["slot"] for r in one["ranking"]] == [0, 1]
    batch = client.rank_batch("feed", [{"features": [1.0, 0.0, 0.0], "actions": actions,
                                        "slots": 1}] * 3)
    assert [len(r["ranking"]) for r in batch] == [1, 1, 1]
    greedy = client.rank("feed", [1.0, 0.0, 0.0], actions, explore=False)
    assert "event_id" not in greedy
    shown = one["ranking"][0]["id"]
    assert client.feedback("feed", one["event_id"], clicks=[shown]) == {"accepted": True}
    result = client.feedback_batch("feed", [
        {"event_id": batch[0]["event_id"], "rewards": {batch[0]["ranking"][0]["id"]: 0.5}},
        {"event_id": batch[1]["event_id"], "clicks": ["item-9"]}])
    assert result["accepted"] == 1 and result["rejected"][0]["error"]["field"] == (
        "events[1].clicks[0]")
    with pytest.raises(NoisyloopError) as info:
        client.feedback("feed", one["event_id"], clicks=[])
    assert (info.value.status, info.value.code) == (409, "duplicate_feedback")
    assert client.sync("feed", timeout=10)["pending"] == 0
    model = client.get_model("feed")
    assert model["stats"]["events_applied"] == 2
    assert model["position_bias"] == {"values": [1.0, 1.0], "source": "insufficient_data",
                                      "calibration_unreliable": True}


async def test_series(service: Service, client: Client, api_key: str,
                      redis_server: EmbeddedRedis) -> None:
    _model(client)
    assert client.series("m1") == {"points": [], "next_before": None}
    tenant = api_key.split(".")[1]
    point = {"t": 1.0, "version": 2, "events_applied": 10, "events": 10,
             "events_per_second": 1.0, "online_reward": 0.5, "calibrated_reward": 0.6,
             "debiased_reward": 0.6, "rho0": 0.1, "rho1": 0.2, "noise_source": "initial",
             "rho0_interval": None, "rho1_interval": None, "pending": 0, "backlog": 0}
    with redis.Redis.from_url(redis_server.url) as r:  # as the trainer appends them
        for i in range(3):
            r.rpush(ModelKeys(tenant, "m1").series, json.dumps({**point, "t": float(i)}))
    assert [p["t"] for p in client.series("m1")["points"]] == [0.0, 1.0, 2.0]
    async with AsyncClient(service.url, api_key) as ac:
        assert [p["t"] for p in (await ac.series("m1", limit=1))["points"]] == [2.0]
    older = client.series("m1", limit=1, before=2.0)  # the next page back in time
    assert [p["t"] for p in older["points"]] == [1.0] and older["next_before"] == 1.0
    with pytest.raises(NoisyloopError) as info:
        client.series("m1", limit=0)
    assert info.value.status == 422 and info.value.field == "limit"


def test_drift_label_budget_and_a_tenants_models(admin: Client, client: Client,
                                                 api_key: str) -> None:
    model = client.create_model("m1", "label", 4, n_classes=3, drift={"action": "alert"})
    assert model["drift"]["action"] == "alert"
    assert client.set_drift("m1", "none")["drift"]["status"] == "off"
    client.create_model("r1", "regression", 3, label_budget={"budget": 2},
                        max_feature_norm=10.0)
    budget = client.label_budget("r1")
    assert (budget["budget"], budget["rounds"], budget["labels_used"]) == (2.0, 0, 0)
    with pytest.raises(NoisyloopError) as info:
        client.label_budget("m1")
    assert (info.value.status, info.value.code) == (404, "no_label_budget")
    tenant = api_key.split(".")[1]  # nl.<tenant>.<secret>
    assert admin.list_tenant_models(tenant) == client.list_models()
