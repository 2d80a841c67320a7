"""The jobs role's noise estimates against a real Redis: which models keep samples and get
estimates, as their learner classes declare (``keeps_noise_samples``,
``owns_noise_estimate``, ``noise_samples``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
import pytest
import redis

from app.store import Store
from app.store.keys import NOISE_DUE
from app.store.nrest import AnchorStore, SampleStore
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, decisions, model_config
from workers import jobs, nrest
from workers.worker import Worker


async def test_sample_buffers_follow_the_declared_capabilities(store: Store) -> None:
    """rcine keeps its ``n_s`` samples, a ridge bandit the worker's ``nrest_buffer``, rcnbf none."""
    configs = [model_config("own", algorithm="rcine", params={"gamma": 0.1, "n_s": 40}),
               model_config("ridge", algorithm="linucb_diag", params={}),
               model_config("plain")]
    keys = [await create_model(store, config) for config in configs]
    for mk, config in zip(keys, configs, strict=True):
        logged, clicks = decisions(config, 60)
        await store.events.record_decisions(mk, logged, 60, 60)
        await store.events.take_feedback_many(
            mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks,
                                                                      strict=True)])
    settings = WorkerSettings(roles=("trainer",), worker_id="t", nrest_threads=True,
                              nrest_buffer=25)
    assert await Worker(store, settings).drain() == 180
    samples = [await SampleStore(store.redis).load(mk) for mk in keys]
    assert samples[0] is not None and samples[0].X.shape == (40, 6)
    assert samples[1] is not None and samples[1].X.shape == (25, 6)
    assert samples[2] is None


def test_periodic_estimates_skip_configured_rates_unless_the_estimate_is_the_algorithms() -> None:
    own, ridge, plain = (model_config(algorithm=a) for a in ("rcine", "linucb_diag", "rcnbf"))
    assert nrest.estimates_periodically(own, "configured")
    assert nrest.estimates_periodically(ridge, "estimated")
    assert not nrest.estimates_periodically(ridge, "configured")
    assert not nrest.estimates_periodically(plain, "estimated")


async def test_a_queued_estimate_runs_the_models_estimator_and_says_insufficient_data(
        store: Store) -> None:
    mk = await create_model(store, model_config())  # rcnbf: the anchor estimator, no plays
    job_id = await store.noise.queue_estimate(mk)
    await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n", nrest_threads=True)
                 ).drain()
    job = await store.noise.job(mk, job_id)
    assert job is not None and job["status"] == "done", job
    out = orjson.loads(job["outcome"])
    assert (out["estimator"], out["status"], out["reason"], out["n_events"]) == (
        "anchor", "insufficient_data", "too_few_events", 0)
    noise = await store.noise.get(mk)
    assert noise is not None and noise.source == "initial"


async def test_a_queued_nrest_estimate_of_a_model_without_samples_fails_naming_those_with(
        store: Store) -> None:
    mk = await create_model(store, model_config())
    await AnchorStore(store.redis).configure(mk, estimator="nrest")  # as no PUT would allow
    job_id = await store.noise.queue_estimate(mk)
    await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n", nrest_threads=True)
                 ).drain()
    job = await store.noise.job(mk, job_id)
    assert job is not None and job["status"] == "failed"
    assert job["reason"] == ("'rcnbf' models keep no NREst sample buffer (the label "
                             "algorithms that do: linucb_diag, rcine, squarecb_diag, linucb, "
                             "lints_diag)")


#: Idle models beside the one with new samples: a pass that looked at each would run at
#: least two commands per model (its two counts), 120 here.
IDLE_MODELS = 60
#: Commands of a jobs pass that looks at one model with new samples and finds no estimate
#: due (its queue looks, its due read, counts, config, settings, reschedule: about 20).
PASS_COMMANDS = 60


async def test_jobs_pass_looks_only_at_models_with_new_samples(store: Store,
                                                               redis_url: str) -> None:
    config = model_config(algorithm="rcine", params={"gamma": 0.1, "n_s": 40})
    mk = await create_model(store, config)
    for i in range(IDLE_MODELS):
        await create_model(store, model_config(f"idle{i}"))
    X = np.zeros((3, 6))
    await SampleStore(store.redis).append(mk, X, np.zeros(3, dtype=np.int64), np.ones(3), 40)
    assert [m for m, _ in await store.redis.zrange(NOISE_DUE, 0, -1, withscores=True)] == [
        b"t/m"]  # only the model that has new samples
    ctx = await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n",
                                             nrest_threads=True)).start()
    ctx.noise_seeded_at = time.monotonic()  # the periodic look at every model just ran
    with redis.Redis.from_url(redis_url) as r:
        before = sum(int(s["calls"]) for s in r.info("commandstats").values())
        assert await jobs.run_pass(ctx) == 0  # 3 new samples of 40: not due
        assert sum(int(s["calls"]) for s in r.info("commandstats").values()) - before \
            < PASS_COMMANDS
    [(_, at)] = await store.redis.zrange(NOISE_DUE, 0, -1, withscores=True)
    assert at > time.time() + ctx.config.nrest_interval - 60  # looked at again when stale
    ctx.stopping.set()


async def test_samples_that_arrive_during_a_pass_make_the_model_due_at_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer's lowering can land between a pass's look (not due yet) and its
    rescheduling, which overwrites the score: the rescheduling must see the count itself,
    or the estimate waits ``nrest_interval`` (600 s) for a look."""
    config = model_config(algorithm="rcine", params={"gamma": 0.1, "n_s": 40})
    mk = await create_model(store, config)
    await AnchorStore(store.redis).configure(mk, estimator="nrest")
    samples = SampleStore(store.redis)
    X = np.zeros((3, 6))
    await samples.append(mk, X, np.zeros(3, dtype=np.int64), np.ones(3), 40)
    looked = nrest._periodic

    async def look_then_trainer_appends(*args: Any) -> int:
        ran = await looked(*args)
        X = np.zeros((37, 6))
        await samples.append(mk, X, np.zeros(37, dtype=np.int64), np.ones(37), 40)
        return ran

    monkeypatch.setattr(nrest, "_periodic", look_then_trainer_appends)
    ctx = await Worker(store, WorkerSettings(roles=("jobs",), worker_id="n",
                                             nrest_threads=True)).start()
    ctx.noise_seeded_at = time.monotonic()
    assert await jobs.run_pass(ctx) == 0  # 3 of 40 at the look: not due
    [(_, at)] = await store.redis.zrange(NOISE_DUE, 0, -1, withscores=True)
    assert at <= time.time()  # 40 of 40 now: due at the next pass
    monkeypatch.setattr(nrest, "_periodic", looked)
    assert await jobs.run_pass(ctx) == 1
    ctx.stopping.set()
