"""Sweeper role: unanswered decisions become no-click events (or are dropped), exactly once."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
import redis

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.store import Store
from app.store.keys import SWEEP_DUE
from app.store.nrest import SampleStore
from app.worker_settings import WorkerSettings
from tests.deadlines import pass_deadlines_async
from tests.workers.conftest import create_model, decisions, model_config
from workers import sweeper
from workers.worker import Worker


def worker(store: Store) -> Worker:
    return Worker(store, WorkerSettings(roles=("sweeper", "trainer"), worker_id="sw",
                                        nrest_threads=True))


async def test_sweeper_turns_unanswered_decisions_into_no_clicks(store: Store) -> None:
    config = model_config(feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    mk = await create_model(store, config)
    logged, clicks = decisions(config, 12)
    await store.events.record_decisions(mk, logged, 1, 60)
    answered = logged[:5]
    for (eid, _), c in zip(answered, clicks[:5], strict=True):
        assert (await store.events.take_feedback(mk, eid, {"click": np.array(c)})).status == "ok"
    assert await worker(store).drain() == 5  # nothing is due yet
    assert await pass_deadlines_async(store.redis, mk) == 7
    assert await worker(store).drain() == 7 + 7  # 7 expired, then 7 applied
    late = await store.events.take_feedback(mk, logged[-1][0], {"click": np.array(1.0)})
    assert late.status == "unknown"  # the API answers 404
    info = await store.snapshots.info(mk)
    assert info is not None and info.events_expired == 7 and info.events_applied == 12
    events = [{**ctx, "click": np.array(c)}
              for (_, ctx), c in zip(answered, clicks[:5], strict=True)]
    events += [{**ctx, **(config.timeout_feedback or {})} for _, ctx in logged[5:]]
    learner = build_learner(config)
    learner.learn_many(stack_events(events))
    snap = await store.snapshots.load(mk)
    assert snap is not None
    np.testing.assert_allclose(snap.state["W_"], learner.get_state()["W_"], rtol=1e-12,
                               atol=1e-12)


async def test_sweeper_drops_decisions_under_on_timeout_drop(store: Store) -> None:
    config = model_config(feedback={"wait_seconds": 1, "on_timeout": "drop"})
    mk = await create_model(store, config)
    logged, _ = decisions(config, 4)
    await store.events.record_decisions(mk, logged, 1, 60)
    assert await pass_deadlines_async(store.redis, mk) == 4
    assert await worker(store).drain() == 4  # 4 expired, none applied
    info = await store.snapshots.info(mk)
    assert info is not None and info.events_expired == 4 and info.events_applied == 0
    assert info.version == 1


@pytest.mark.slow
async def test_feedback_and_sweeper_racing_end_each_decision_once(store: Store) -> None:
    """At the deadline, feedback and expiry run concurrently: each decision ends once."""
    config = model_config(feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    mk = await create_model(store, config)
    logged, _ = decisions(config, 300)
    ids = [eid for eid, _ in logged]
    deadline = await store.events.record_decisions(mk, logged, 1, 60)
    while await store.events.server_time() < deadline + 0.9:  # just before 'due' flips
        await asyncio.sleep(0.01)

    async def feedback(eid: str) -> str:
        return (await store.events.take_feedback(mk, eid, {"click": np.array(1.0)})).status

    async def sweep() -> list[str]:
        out: list[str] = []
        while await store.redis.zcard(mk.pending):
            due = await store.events.due_decisions(mk, await store.events.server_time(), 1000)
            out += await store.events.expire_many(mk, due, "no_click",
                                                  config.timeout_feedback or {})
            await asyncio.sleep(0.002)
        return out

    sweeper = asyncio.create_task(sweep())
    statuses = []
    for eid in ids:  # feedback trickles in across the deadline
        statuses.append(await feedback(eid))
        await asyncio.sleep(0.001)
    swept = await sweeper
    accepted = statuses.count("ok")
    expired = swept.count("expired")
    assert accepted + expired == len(ids)
    assert accepted > 0 and expired > 0, (accepted, expired)
    assert set(statuses) <= {"ok", "unknown"}
    assert await store.redis.xlen(mk.events) == len(ids)  # one event per decision
    info = await store.snapshots.info(mk)
    assert info is not None and info.events_expired == expired


async def test_noise_samples_keep_only_observed_feedback_not_default_no_clicks(
        store: Store) -> None:
    config = model_config(algorithm="rcine", params={"gamma": 0.1, "n_s": 100},
                          feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    mk = await create_model(store, config)
    logged, clicks = decisions(config, 9)
    await store.events.record_decisions(mk, logged, 1, 60)
    answered = [1, 4, 6]
    await store.events.take_feedback_many(
        mk, [(logged[i][0], {"click": np.array(clicks[i])}) for i in answered])
    assert await pass_deadlines_async(store.redis, mk) == 6
    sweeper = Worker(store, WorkerSettings(roles=("sweeper",), worker_id="s", nrest_threads=True))
    assert await sweeper.drain() == 6
    # one batch of 3 answered and 6 default events
    assert await Worker(store, WorkerSettings(roles=("trainer",), worker_id="t",
                                              nrest_threads=True, batch_size=10)).drain() == 9
    samples = await SampleStore(store.redis).load(mk)
    assert samples is not None
    np.testing.assert_array_equal(samples.X, np.stack([logged[i][1]["x"] for i in answered]))
    np.testing.assert_array_equal(samples.played, [int(logged[i][1]["played"]) for i in answered])
    np.testing.assert_array_equal(samples.clicks, clicks[answered])


async def test_jobs_stored_but_never_queued_are_queued_again(store: Store) -> None:
    """A creator that dies between storing a job and queueing it (its reference removed
    from the queue here) leaves it queued on no queue: a sweeper pass past the grace period
    queues it again (once: a job on its queue is left there), a worker takes it, and the
    next pass forgets it."""
    config = model_config()
    mk = await create_model(store, config)
    evaluations, nrest = store.evaluations.jobs, store.noise.jobs
    lost = await store.evaluations.queue(mk, {"policy": "uniform"})
    waiting = await store.evaluations.queue(mk, {"policy": "logging"})
    estimate = await store.noise.queue_estimate(mk)
    await store.redis.lrem(evaluations.queue, 0, f"t/m/{lost}")
    await store.redis.lrem(nrest.queue, 0, f"t/m/{estimate}")
    sweeper = Worker(store, WorkerSettings(roles=("sweeper",), worker_id="sw"))
    await sweeper.drain()  # within the grace period: nothing moves
    assert await store.redis.llen(evaluations.queue) == 1
    assert await store.redis.llen(nrest.queue) == 0
    for queue in (evaluations, nrest):  # the grace period passes
        staged = await store.redis.zrange(queue.staged(mk), 0, -1)
        await store.redis.zadd(queue.staged(mk), {job: 0.0 for job in staged})
    await sweeper.drain()
    await sweeper.drain()
    assert sorted(await store.redis.lrange(evaluations.queue, 0, -1)) == sorted(
        [f"t/m/{lost}".encode(), f"t/m/{waiting}".encode()])
    assert await store.redis.lrange(nrest.queue, 0, -1) == [f"t/m/{estimate}".encode()]
    taken = {(await evaluations.take("w", 60)), (await evaluations.take("w", 60))}
    assert {job.job_id for job in taken if job is not None} == {lost, waiting}
    assert (await nrest.take("w", 60)) is not None
    await sweeper.drain()
    assert await store.redis.zcard(evaluations.staged(mk)) == 0
    assert await store.redis.zcard(nrest.staged(mk)) == 0


def _calls(r: redis.Redis) -> int:
    """Commands Redis ran so far (``INFO commandstats``)."""
    return sum(int(stats["calls"]) for stats in r.info("commandstats").values())


#: Idle models beside the one with decisions: a pass that looked at each would run at least
#: this many commands.
IDLE_MODELS = 60
#: Commands of a pass over one due model with 3 decisions to end (about 42: its due read,
#: 3 expiry Lua steps with the commands they run, the reschedule, one commandstats read),
#: whatever the number of idle models; one command per idle model would pass it by 60-48.
PASS_COMMANDS = 90


async def test_sweeper_pass_looks_only_at_models_due(store: Store, redis_url: str) -> None:
    config = model_config(feedback={"wait_seconds": 1, "on_timeout": "drop"})
    mk = await create_model(store, config)
    for i in range(IDLE_MODELS):
        await create_model(store, model_config(f"idle{i}"))
    logged, _ = decisions(config, 3)
    deadline = await store.events.record_decisions(mk, logged, 1, 60)
    assert deadline is not None
    scheduled = await store.redis.zrange(SWEEP_DUE, 0, -1, withscores=True)
    assert scheduled == [(b"t/m", deadline + 1.0)]  # only the model that has decisions
    while await store.events.server_time() < deadline + 1:
        await asyncio.sleep(0.05)
    ctx = await worker(store).start()
    ctx.swept_all_at = ctx.requeued_at = time.monotonic()  # the periodic looks just ran
    with redis.Redis.from_url(redis_url) as r:
        before = _calls(r)
        assert await sweeper.run_pass(ctx) == 3
        assert _calls(r) - before < PASS_COMMANDS
    assert await store.redis.zcard(SWEEP_DUE) == 0  # nothing left to end
    await store.events.record_decisions(mk, logged[:1], 60, 60)
    assert await store.redis.zcard(SWEEP_DUE) == 1  # scheduled again
    ctx.stopping.set()
