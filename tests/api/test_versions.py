"""Kept versions and rollback through the service with its in-process trainer."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import redis

from app.api import modelops
from app.learners.config import ModelConfig
from app.learners.registry import default_params, learner_class
from app.store import Store, codec
from app.store.challengers import ChallengerStore
from app.store.decisionlog import LoggedBatch
from app.store.keys import ModelKeys
from app.store.versions import VersionStore
from tests.api.conftest import TestClient, follow_pages, new_model, new_tenant

X = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.5], [0.3, 0.3, 0.3, 0.3]]


def _model_of(client: TestClient, auth: dict[str, str], model_id: str = "m1",
              **overrides: Any) -> dict[str, Any]:
    """A regression model (its predictions are real values to compare)."""
    return new_model(client, auth, model_id=model_id, task="regression", algorithm="nlms",
                     n_classes=None, **overrides)


def _train(client: TestClient, auth: dict[str, str], features: list[float], value: float,
           model: str = "m1") -> None:
    """One decision on ``features`` with its label ``value``, applied by the trainer."""
    p = client.post(f"/v1/models/{model}/predict", json={"features": features},
                    headers=auth).json()
    r = client.post(f"/v1/models/{model}/feedback", json={"event_id": p["event_id"],
                                                         "values": [value]}, headers=auth)
    assert r.status_code == 202, r.text
    assert client.post(f"/v1/models/{model}/sync", headers=auth).status_code == 200


def _scores(client: TestClient, auth: dict[str, str], model: str = "m1") -> list[float]:
    r = client.post(f"/v1/models/{model}/predict", json={"instances": X, "explore": False},
                    headers=auth)
    assert r.status_code == 200, r.text
    return [p["value"] for p in r.json()["predictions"]]


def _versions(client: TestClient, auth: dict[str, str], model: str = "m1") -> dict[str, Any]:
    r = client.get(f"/v1/models/{model}/versions", headers=auth)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _model(client: TestClient, auth: dict[str, str], model: str = "m1") -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/models/{model}", headers=auth).json()
    return body


@pytest.mark.slow
def test_versions_kept_at_most_once_per_interval_and_capped(
        client: TestClient, tenant: dict[str, str]) -> None:
    _model_of(client, tenant, "hourly", versions={"kept": 20, "interval_seconds": 3600})
    _model_of(client, tenant, "every", versions={"kept": 3, "interval_seconds": 0})
    _model_of(client, tenant, "tenth", versions={"kept": 50, "interval_seconds": 0.4})
    assert _model(client, tenant, "every")["versions"] == {"kept": 3, "interval_seconds": 0.0}
    start = time.monotonic()
    for i in range(12):
        for model in ("hourly", "every", "tenth"):
            _train(client, tenant, X[i % 4], float(i % 3), model)
        time.sleep(0.1)
    elapsed = time.monotonic() - start
    # created (version 1, kept at once), then 12 publishes by the trainer
    hourly = _versions(client, tenant, "hourly")
    assert hourly["version"] == 13
    assert [(v["version"], v["reason"]) for v in hourly["versions"]] == [(1, "create")]
    every = _versions(client, tenant, "every")
    assert [v["version"] for v in every["versions"]] == [13, 12, 11]
    assert [v["events_applied"] for v in every["versions"]] == [12, 11, 10]
    assert [v["current"] for v in every["versions"]] == [True, False, False]
    assert all(v["reason"] == "trainer" and v["created_at"] for v in every["versions"])
    tenth = [v for v in _versions(client, tenant, "tenth")["versions"] if v["reason"] == "trainer"]
    assert 2 <= len(tenth) <= elapsed / 0.4 + 1, (len(tenth), elapsed)
    # an explicit change is kept at once, whatever the interval
    assert client.post("/v1/models/hourly/reset", headers=tenant).status_code == 200
    hourly = _versions(client, tenant, "hourly")
    assert [(v["version"], v["reason"], v["current"]) for v in hourly["versions"]] == [
        (14, "reset", True), (1, "create", False)]


@pytest.mark.slow
def test_rollback_restores_predictions_and_learning_goes_on(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    _model_of(client, tenant, versions={"kept": 20, "interval_seconds": 0})
    for i in range(4):
        _train(client, tenant, X[i], 1.0)
    kept = _versions(client, tenant)["versions"][0]
    assert kept["version"] == 5 and kept["events_applied"] == 4
    before = _scores(client, tenant)
    snap_before = client.get("/v1/models/m1/snapshot", headers=tenant).json()
    for i in range(6):
        _train(client, tenant, X[i % 4], -2.0)
    assert _scores(client, tenant) != before
    r = client.post("/v1/models/m1/rollback", json={"version": 5}, headers=tenant)
    assert r.status_code == 200, r.text
    assert r.json() == {"version": 12, "rolled_back_to": 5}
    assert _scores(client, tenant) == before
    model = _model(client, tenant)
    assert model["version"] == 12 and model["stats"]["events_applied"] == 10
    newest = _versions(client, tenant)["versions"][0]
    assert (newest["version"], newest["reason"], newest["current"]) == (12, "rollback", True)
    # the rollback is in the decision log
    markers = [orjson.loads(f[b"d"]) for _, f in
               redis.Redis.from_url(redis_url).xrange(ModelKeys("acme", "m1").log)
               if f.get(b"m") == b"rollback"]
    assert markers == [{"version": 12, "rolled_back_to": 5, "algorithm": "nlms"}]
    # the trainer learns on top of the restored state: the same event on a model imported
    # from version 5 gives the same state
    _model_of(client, tenant, "twin")
    assert client.put("/v1/models/twin/snapshot", json={"state": snap_before["state"]},
                      headers=tenant).status_code == 200
    for model in ("m1", "twin"):
        _train(client, tenant, X[2], 3.0, model)
    assert _scores(client, tenant, "m1") == _scores(client, tenant, "twin") != before
    model = _model(client, tenant)
    assert model["version"] == 13 and model["stats"]["events_applied"] == 11


@pytest.mark.slow
def test_rollback_errors_name_the_field_and_other_tenants_get_404(
        client: TestClient, tenant: dict[str, str]) -> None:
    _model_of(client, tenant, versions={"kept": 2, "interval_seconds": 0})
    for i in range(3):
        _train(client, tenant, X[i], 1.0)
    # versions 1 and 2 were dropped (only 2 kept)
    assert [v["version"] for v in _versions(client, tenant)["versions"]] == [4, 3]
    for version in (1, 99):
        r = client.post("/v1/models/m1/rollback", json={"version": version}, headers=tenant)
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == "unknown_version"
        assert r.json()["error"]["field"] == "version"
    for body in ({"version": 0}, {"version": "3"}, {"version": 2.5}, {}, {"version": 3, "x": 1}):
        r = client.post("/v1/models/m1/rollback", json=body, headers=tenant)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["field"] in ("version", "x"), (body, r.text)
    other = new_tenant(client, "globex")
    for r in (client.get("/v1/models/m1/versions", headers=other),
              client.post("/v1/models/m1/rollback", json={"version": 3}, headers=other)):
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    assert _model(client, tenant)["version"] == 4
    r = client.post("/v1/models", json={"model_id": "m2", "task": "regression", "n_features": 4,
                                        "versions": {"kept": 101}},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "versions.kept"


@pytest.mark.slow
def test_delete_drops_the_kept_versions(client: TestClient, tenant: dict[str, str],
                                        redis_url: str) -> None:
    _model_of(client, tenant, versions={"kept": 5, "interval_seconds": 0})
    _train(client, tenant, X[0], 1.0)
    mk = ModelKeys("acme", "m1")
    r = redis.Redis.from_url(redis_url)
    assert r.zcard(mk.versions) == 2 and r.hlen(mk.version_states) == 4
    assert client.delete("/v1/models/m1", headers=tenant).status_code == 204
    assert not r.exists(mk.versions, mk.version_states)
    _model_of(client, tenant)
    assert [v["version"] for v in _versions(client, tenant)["versions"]] == [1]


@pytest.mark.slow
def test_kept_none(client: TestClient, tenant: dict[str, str]) -> None:
    _model_of(client, tenant, versions={"kept": 0, "interval_seconds": 0})
    _train(client, tenant, X[0], 1.0)
    assert _versions(client, tenant) == {"version": 2, "versions": [], "next_before": None}


@pytest.mark.slow
def test_rollback_across_a_promote_restores_the_algorithm(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, versions={"kept": 20, "interval_seconds": 0})
    r = client.post("/v1/models/m1/challengers", json={"name": "ucb", "algorithm": "linucb_diag",
                                                       "params": {}}, headers=tenant)
    assert r.status_code == 201, r.text
    for i in range(20):
        p = client.post("/v1/models/m1/predict", json={"features": X[i % 4]},
                        headers=tenant).json()
        client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"],
                                                    "click": p["label"] == i % 3},
                    headers=tenant)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    champion = _model(client, tenant)["version"]
    before = client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"]
    r = client.post("/v1/models/m1/promote", json={"challenger": "ucb"}, headers=tenant)
    assert r.status_code == 200, r.text
    newest = _versions(client, tenant)["versions"][0]
    assert (newest["version"], newest["reason"]) == (champion + 1, "promote")
    assert _model(client, tenant)["algorithm"] == "linucb_diag"
    r = client.post("/v1/models/m1/rollback", json={"version": champion}, headers=tenant)
    assert r.status_code == 200, r.text
    model = _model(client, tenant)
    assert (model["algorithm"], model["params"]["gamma"]) == ("rcnbf", 0.05)
    assert client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"] == before
    p = client.post("/v1/models/m1/predict", json={"features": X[0]}, headers=tenant).json()
    client.post("/v1/models/m1/feedback", json={"event_id": p["event_id"], "click": True},
                headers=tenant)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    model = _model(client, tenant)
    assert model["stats"]["events_applied"] == 21 and model["version"] == r.json()["version"] + 1


def test_a_reset_racing_a_promotion_never_publishes_the_old_algorithms_state(
        client: TestClient, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reset built the initial state of the algorithm it read, then a promotion set
    another algorithm and its state: publishing the reset's state would run it under the
    promoted config.  409 model_changed; the promoted state stays."""
    auth = new_tenant(client)
    new_model(client, auth, algorithm="linucb_diag", n_features=3, n_classes=3)
    mk = ModelKeys("acme", "m1")
    real = modelops.build_learner
    calls = 0
    promoted_state: list[bytes] = []

    def promote_meanwhile(config: ModelConfig, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # as challenger_promote.lua does: config, state and version at once
            with redis.Redis.from_url(redis_url) as r:
                promoted = config.updated(
                    algorithm="squarecb_diag",
                    params=default_params(learner_class("label", "squarecb_diag")))
                promoted_state.append(codec.encode(real(promoted).get_state()))
                with r.pipeline(transaction=True) as pipe:
                    pipe.hset(mk.meta, "config", promoted.to_json())
                    pipe.hset(mk.snapshot, "state", promoted_state[0])
                    pipe.hincrby(mk.snapshot, "version", 1)
                    pipe.execute()
        return real(config, *args, **kwargs)

    monkeypatch.setattr(modelops, "build_learner", promote_meanwhile)
    r = client.post("/v1/models/m1/reset", headers=auth)
    assert r.status_code == 409 and r.json()["error"]["code"] == "model_changed", r.text
    with redis.Redis.from_url(redis_url) as r:
        assert int(r.hget(mk.snapshot, "version")) == 2
        assert r.hget(mk.snapshot, "state") == promoted_state[0]


def _publish_a_batch_after(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                           redis_url: str) -> None:
    """Make ``owner.name`` (the step that changes the version) publish a trainer batch, with
    one logged event, right after it returns: as a trainer that published meanwhile."""
    real = getattr(owner, name)

    async def then_a_batch(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        store = Store.from_url(redis_url)
        try:
            mk = ModelKeys("acme", "m1")
            snap = await store.snapshots.load(mk)
            assert snap is not None
            await store.snapshots.publish(mk, snap.state, logged=LoggedBatch.pack(
                [["1-1"], [b"feedback"], [b"e1"], [b"c"], [b"f"]]))
        finally:
            await store.close()
        return result

    monkeypatch.setattr(owner, name, then_a_batch)


def _log_kinds(redis_url: str) -> list[tuple[str, int]]:
    """The decision log's entries in order: (marker type or "events", version)."""
    with redis.Redis.from_url(redis_url) as r:
        entries = r.xrange(ModelKeys("acme", "m1").log)
    return [(f[b"m"].decode(), orjson.loads(f[b"d"])["version"]) if f[b"k"] == b"marker"
            else ("events", int(f[b"v"])) for _, f in entries]


@pytest.mark.parametrize("change", ["rollback", "reset", "promote"])
def test_the_marker_is_logged_in_the_step_that_changes_the_version(
        idle_client: TestClient, redis_url: str, monkeypatch: pytest.MonkeyPatch,
        change: str) -> None:
    """A trainer batch published right after a rollback, reset or promotion comes after its
    marker in the decision log (the marker was added after the change, in a step of its
    own)."""
    client = idle_client
    auth = new_tenant(client)
    new_model(client, auth, versions={"kept": 20, "interval_seconds": 0})
    assert client.post("/v1/models/m1/challengers", json={"name": "ucb",
                       "algorithm": "linucb_diag"}, headers=auth).status_code == 201
    owner, name, call = {
        "rollback": (VersionStore, "rollback", ("/v1/models/m1/rollback", {"version": 1})),
        "reset": (modelops, "publish_explicit", ("/v1/models/m1/reset", None)),
        "promote": (ChallengerStore, "promote", ("/v1/models/m1/promote",
                                                 {"challenger": "ucb"}))}[change]
    _publish_a_batch_after(monkeypatch, owner, name, redis_url)
    r = client.post(call[0], json=call[1], headers=auth)
    assert r.status_code == 200, r.text
    assert _log_kinds(redis_url) == [(change, 2), ("events", 3)]


@pytest.mark.slow
def test_a_rollback_keeps_the_state_before_it_so_it_can_be_undone(
        client: TestClient, tenant: dict[str, str]) -> None:
    _model_of(client, tenant, versions={"kept": 20, "interval_seconds": 3600})
    for i in range(2):
        _train(client, tenant, X[i], 1.0)
    learned = _scores(client, tenant)
    assert [v["version"] for v in _versions(client, tenant)["versions"]] == [1]  # the create
    r = client.post("/v1/models/m1/rollback", json={"version": 1}, headers=tenant)
    assert r.status_code == 200, r.text
    assert [(v["version"], v["reason"]) for v in _versions(client, tenant)["versions"]] == [
        (4, "rollback"), (3, "before rollback"), (1, "create")]
    assert _scores(client, tenant) != learned
    r = client.post("/v1/models/m1/rollback", json={"version": 3}, headers=tenant)
    assert r.status_code == 200, r.text
    assert _scores(client, tenant) == learned


@pytest.mark.parametrize("change", ["rollback", "promote"])
def test_the_published_version_is_kept_even_when_the_trainer_publishes_right_after(
        idle_client: TestClient, redis_url: str, monkeypatch: pytest.MonkeyPatch,
        change: str) -> None:
    """The version a rollback or promotion publishes is kept in its own step (a keep after
    it, expecting that version, kept nothing once the trainer had published on top)."""
    client = idle_client
    auth = new_tenant(client)
    new_model(client, auth, versions={"kept": 20, "interval_seconds": 3600})
    assert client.post("/v1/models/m1/challengers", json={"name": "ucb",
                       "algorithm": "linucb_diag"}, headers=auth).status_code == 201
    if change == "rollback":
        _publish_a_batch_after(monkeypatch, VersionStore, "rollback", redis_url)
        r = client.post("/v1/models/m1/rollback", json={"version": 1}, headers=auth)
    else:
        _publish_a_batch_after(monkeypatch, ChallengerStore, "promote", redis_url)
        r = client.post("/v1/models/m1/promote", json={"challenger": "ucb"}, headers=auth)
    assert r.status_code == 200, r.text
    kept = [(v["version"], v["reason"]) for v in _versions(client, auth)["versions"]]
    assert kept == [(2, change), (1, "create")]


def test_a_versions_list_past_the_byte_bound_comes_back_cut_with_the_next_before(
        client: TestClient, tenant: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from app.store import paging, versions

    _model_of(client, tenant)
    for _ in range(6):  # each reset keeps its version: 7 kept with the create's
        assert client.post("/v1/models/m1/reset", headers=tenant).status_code == 200
    whole = client.get("/v1/models/m1/versions", headers=tenant).json()
    assert len(whole["versions"]) == 7 and whole["next_before"] is None
    store = client.app.state.ctx.store.versions
    mk = ModelKeys("acme", "m1")
    stored = client.portal.call(store.kept, mk)
    bound = sum(len(orjson.dumps(k)) for k in stored[:2]) + 5  # two versions a page
    monkeypatch.setattr(paging, "MAX_PAGE_BYTES", bound)
    monkeypatch.setattr(versions, "VERSIONS_PER_READ", 3)
    pages = follow_pages(client, "/v1/models/m1/versions", tenant, "next_before", "before")
    assert all(0 < len(page["versions"]) <= 2 for page in pages)  # cut by bytes, not limit
    seen = [v for page in pages for v in page["versions"]]
    assert seen == whole["versions"] and len(pages) == 4  # every version once, newest first
    r = client.get("/v1/models/m1/versions", params={"limit": 1001}, headers=tenant)
    assert r.status_code == 422 and "limit" in r.text
