"""noisyloop on a 3-master Redis Cluster: two ``noisyloop api`` and two ``noisyloop worker``.

The processes are the real commands, started with ``--redis-url
redis+cluster://...``.  Every prediction is served by one API process and
its feedback posted to the other; the two workers share the models'
trainer leases and the sweeper.  The models' keys must land on more than
one shard, each model's keys on one (its hash tag), and every accepted
event must change its model exactly once (the weights equal a local replay).
"""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import ValidationError
from redis.cluster import RedisCluster
from redis.crc import key_slot

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.settings import Settings
from app.store import keys
from app.store.client import connect, is_cluster_url
from app.store.embedded import free_port
from app.store.keys import ModelKeys
from tests.cluster.conftest import LocalCluster
from tests.serve_process import ready

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

ADMIN_TOKEN = "cluster-test-admin-token-0123456789"
WORKER_FLAGS = ["--roles", "trainer,sweeper", "--lease-ttl", "2", "--heartbeat-ttl", "3",
                "--flush-interval", "0.02", "--poll-interval", "0.1"]
MODELS = [f"m{i}" for i in range(6)]
N_FEATURES, N_CLASSES, ROUNDS, PER_ROUND = 6, 3, 2, 150


def test_connect_cluster_url_seeds_every_listed_node() -> None:
    client: Any = connect("redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001")
    seeds = {(n.host, n.port) for n in client.nodes_manager.startup_nodes.values()}
    assert seeds == {("10.0.0.1", 7000), ("10.0.0.2", 7001)}
    assert client.connection_kwargs["password"] == "pw"
    assert is_cluster_url("rediss+cluster://h:1") and not is_cluster_url("redis://h:1")
    assert Settings(redis_url="redis+cluster://h:7000,h:7001").redis_url.startswith("redis+c")
    with pytest.raises(ValidationError):
        Settings(redis_url="cluster://h:7000")


def _env() -> dict[str, str]:
    env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN, "NOISYLOOP_LOG_LEVEL": "WARNING",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL"):
        env.pop(name, None)
    return env


@pytest.fixture
def stack(redis_cluster: LocalCluster) -> Iterator[list[str]]:
    """Two API processes and two worker processes on the cluster; yields the API base URLs."""
    ports = [free_port(), free_port()]
    cmd = [sys.executable, "-m", "app.cli"]
    procs = [subprocess.Popen([*cmd, "api", "--redis-url", redis_cluster.url, "--port", str(p)],
                              env=_env()) for p in ports]
    procs += [subprocess.Popen([*cmd, "worker", "--redis-url", redis_cluster.url,
                                "--worker-id", w, *WORKER_FLAGS], env=_env()) for w in ("wa", "wb")]
    bases = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        deadline = time.monotonic() + 40
        for base in bases:
            while not ready(base):
                assert all(p.poll() is None for p in procs), "a process exited early"
                assert time.monotonic() < deadline, f"{base} did not become ready"
                time.sleep(0.2)
        yield bases
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(10)


def _snapshot_state(api: httpx.Client, model: str) -> dict[str, np.ndarray]:
    r = api.get(f"/v1/models/{model}/snapshot")
    assert r.status_code == 200, r.text
    return {name: np.load(io.BytesIO(base64.b64decode(a["data_b64"])), allow_pickle=False)
            for name, a in r.json()["state"].items()}


def _play(predict_api: httpx.Client, feedback_api: httpx.Client, model: str, X: np.ndarray,
          rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """Predict on one API process, post the feedback to the other; return the joined events."""
    r = predict_api.post(f"/v1/models/{model}/predict", json={"instances": X.tolist()})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    clicks = rng.random(len(preds)) < 0.4
    r = feedback_api.post(f"/v1/models/{model}/feedback", json={"events": [
        {"event_id": p["event_id"], "click": bool(c)} for p, c in zip(preds, clicks, strict=True)]})
    assert r.status_code == 202 and r.json()["accepted"] == len(preds), r.text
    return [{"x": x, "greedy": np.array(p["greedy_label"]), "played": np.array(p["label"]),
             "prob": np.array(p["probability"]), "click": np.array(float(c))}
            for x, p, c in zip(X, preds, clicks, strict=True)]


def _wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_two_apis_two_workers_on_cluster_apply_every_event_exactly_once(
        redis_cluster: LocalCluster, stack: list[str]) -> None:
    admin = httpx.Client(base_url=stack[0], timeout=30,
                         headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    r = admin.post("/v1/admin/tenants", json={"tenant_id": "acme"})
    assert r.status_code == 201, r.text
    auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
    apis = [httpx.Client(base_url=base, timeout=30, headers=auth) for base in stack]
    configs = {}
    for i, m in enumerate(MODELS):
        r = apis[i % 2].post("/v1/models", json={
            "model_id": m, "task": "label", "algorithm": "rcnbf", "n_features": N_FEATURES,
            "n_classes": N_CLASSES, "seed": i, "params": {"gamma": 0.1}})
        assert r.status_code == 201, r.text
        configs[m] = r.json()
    r = apis[0].post("/v1/models", json={
        "model_id": "late", "task": "label", "algorithm": "rcnbf", "n_features": N_FEATURES,
        "n_classes": N_CLASSES, "feedback": {"wait_seconds": 1, "on_timeout": "no_click"}})
    assert r.status_code == 201, r.text

    rng = np.random.default_rng(0)
    events: dict[str, list[dict[str, np.ndarray]]] = {m: [] for m in MODELS}
    for k in range(ROUNDS):
        for i, m in enumerate(MODELS):
            X = rng.standard_normal((PER_ROUND, N_FEATURES))
            events[m] += _play(apis[(i + k) % 2], apis[(i + k + 1) % 2], m, X, rng)
    # "late": 2 of 5 decisions answered, the sweeper ends the other 3 with no click
    preds = apis[1].post("/v1/models/late/predict",
                         json={"instances": rng.standard_normal((5, N_FEATURES)).tolist()}
                         ).json()["predictions"]
    r = apis[0].post("/v1/models/late/feedback", json={"events": [
        {"event_id": p["event_id"], "click": True} for p in preds[:2]]})
    assert r.status_code == 202 and r.json()["accepted"] == 2, r.text

    for i, m in enumerate(MODELS):
        r = apis[i % 2].post(f"/v1/models/{m}/sync", params={"timeout": 30})
        assert r.status_code == 200, r.text
        stats = apis[0].get(f"/v1/models/{m}").json()["stats"]
        assert stats["events_applied"] == stats["feedback_accepted"] == ROUNDS * PER_ROUND
        learner = build_learner(ModelConfig.of(configs[m]))
        learner.learn_many(stack_events(events[m]))
        state = _snapshot_state(apis[(i + 1) % 2], m)
        for name, expected in learner.get_state().items():
            np.testing.assert_allclose(state[name], expected, rtol=1e-9, atol=1e-9)
    def late_done() -> dict[str, int] | None:
        stats: dict[str, int] = apis[1].get("/v1/models/late").json()["stats"]
        return stats if stats["events_expired"] == 3 and stats["events_applied"] == 5 else None

    late = _wait_for(late_done, 15, "the sweeper to expire 3 decisions of 'late'")
    assert late["feedback_accepted"] == 2

    # the models' keys spread over the shards, each model's keys on one shard
    shards: dict[str, set[int]] = {m: set() for m in [*MODELS, "late"]}
    for port in redis_cluster.ports:
        with redis_cluster.node(port) as node:
            for key in node.keys("nl:{acme:*"):
                shards[key.decode().split(":")[2].rstrip("}")].add(port)
    assert all(len(ports) == 1 for ports in shards.values()), shards
    assert len(set().union(*shards.values())) >= 2, shards

    # both workers trained: the trainers share the models' leases
    cluster = RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    try:
        def both_own() -> bool:
            return {cluster.get(ModelKeys("acme", m).lease) for m in MODELS} == {b"wa", b"wb"}

        _wait_for(both_own, 15, "both workers to own models")
    finally:
        cluster.close()


@pytest.mark.parametrize(("tenant", "model"), [("acme", "m1"), ("a-b_c", "x_9-y"), ("t", "t")])
def test_model_keys_all_on_one_slot_and_registries_on_their_own(tenant: str, model: str) -> None:
    mk = ModelKeys(tenant, model)
    model_keys = [*mk.fixed(), mk.context("ev"), mk.job("j")]
    assert {key_slot(k.encode()) for k in model_keys} == {key_slot(f"{tenant}:{model}".encode())}
    registry = [keys.TENANT_INDEX, keys.ALL_MODELS, keys.tenant_models(tenant),
                keys.tenant_keys(tenant)]
    assert len({key_slot(k.encode()) for k in registry}) == 1


async def test_delete_removes_answered_contexts_on_every_shard(
        redis_cluster: LocalCluster) -> None:
    """Deleting models whose keys live on different shards leaves none of their keys, the
    context tombstones of answered decisions included, and no other tenant's key."""
    from app.store import Store
    from tests.store.test_events import CLICK, CONFIG, CTX

    store = Store.from_url(redis_cluster.url)
    models = [f"d{i}" for i in range(6)]
    try:
        for tenant in ("gone", "kept"):
            await store.tenants.create(tenant)
            for model in models:
                mk = ModelKeys(tenant, model)
                await store.models.create(tenant, CONFIG.updated(model_id=model),
                                          {"W_": np.zeros((3, 2)), "noise_rates_": np.zeros(2)},
                                          0.0, 0.0)
                await store.events.record_decisions(mk, [("e1", CTX), ("e2", CTX)], 60, 60)
                await store.events.take_feedback(mk, "e1", CLICK)
        slots = {key_slot(ModelKeys("gone", m).meta.encode()) for m in models}
        assert len(slots) > 1
        assert await store.models.delete("gone", models[0]) is True
        assert sorted(await store.models.delete_many("gone", models[1:])) == models[1:]
        for port in redis_cluster.ports:
            with redis_cluster.node(port) as node:
                assert [k for k in node.keys("*") if b"{gone:" in k] == []
        for model in models:
            assert await store.redis.exists(ModelKeys("kept", model).context("e1")) == 1
    finally:
        await store.close()


async def test_jobs_stored_but_never_queued_are_queued_again_across_shards(
        redis_cluster: LocalCluster) -> None:
    """A job's hash and staged id (its model's slot) and the queue (the ``{jobs}`` slot):
    staged in one transaction per model, found stale and queued again over every shard."""
    from app.store import Store
    from tests.store.test_events import CONFIG

    store = Store.from_url(redis_cluster.url)
    models = [f"q{i}" for i in range(6)]
    jobs = store.evaluations.jobs
    try:
        await store.tenants.create("jobs")
        mks = [ModelKeys("jobs", m) for m in models]
        for mk in mks:
            await store.models.create("jobs", CONFIG.updated(model_id=mk.model),
                                      {"W_": np.zeros((3, 2)), "noise_rates_": np.zeros(2)},
                                      0.0, 0.0)
            job_id = await store.evaluations.queue(mk, {"policy": "uniform"})
            await store.redis.lrem(jobs.queue, 0, f"jobs/{mk.model}/{job_id}")
            await store.redis.zadd(jobs.staged(mk), {job_id: 0.0})
        assert len({key_slot(mk.meta.encode()) for mk in mks}) > 1
        assert await jobs.requeue_stale(mks) == len(models)
        assert await jobs.requeue_stale(mks) == 0  # on the queue now: not pushed twice
        assert await store.redis.llen(jobs.queue) == len(models)
    finally:
        await store.models.delete_many("jobs", models)
        await store.redis.delete(jobs.queue)
        await store.close()
