"""Jobs of the jobs role (NREst runs, policy evaluations) are marked running as they are
taken off their queue, so a worker that dies in between never leaves one queued for a day."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from app.store import ModelKeys, Store
from app.store.jobs import ORPHANED, JobQueue
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, model_config
from workers import jobs
from workers.worker import Worker


class Died(Exception):
    """The worker stops right after taking a job."""


async def queue_evaluation(store: Store, mk: ModelKeys) -> tuple[str, JobQueue]:
    return await store.evaluations.queue(mk, {"policy": "uniform"}), store.evaluations.jobs


async def queue_estimate(store: Store, mk: ModelKeys) -> tuple[str, JobQueue]:
    return await store.noise.queue_estimate(mk), store.noise.jobs


#: Test kind -> (its job kind in the registry, how to queue one, its error field).
KINDS: dict[str, tuple[str, Callable[[Store, ModelKeys], Awaitable[tuple[str, JobQueue]]],
                       str]] = {
    "evaluation": ("evaluation", queue_evaluation, "error"),
    "nrest": ("noise_estimate", queue_estimate, "reason"),
}


async def job_of(store: Store, kind: str, mk: ModelKeys, job_id: str) -> dict[str, str]:
    job = await (store.evaluations.get(mk, job_id) if kind == "evaluation"
                 else store.noise.job(mk, job_id))
    assert job is not None
    return job


@pytest.mark.parametrize("kind", KINDS)
async def test_a_worker_dying_right_after_taking_a_job_leaves_it_running_until_its_deadline(
        store: Store, redis_url: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name, queue_job, error_field = KINDS[kind]
    mk = await create_model(store, model_config())
    job_id, queue = await queue_job(store, mk)

    async def die(*args: Any) -> None:
        raise Died

    monkeypatch.setitem(jobs.JOB_KINDS, name, replace(jobs.JOB_KINDS[name], run=die))
    with pytest.raises(Died):
        await Worker(store, WorkerSettings(roles=("jobs",), worker_id="w-1", nrest_threads=True,
                                           nrest_timeout=30.0)).drain()
    job = await job_of(store, kind, mk, job_id)
    assert job["status"] == "running" and job["worker"] == "w-1" and job["started_at"]
    assert time.time() + 30 < float(job["deadline"]) <= time.time() + 90
    assert await queue.take("w-2", 30.0) is None  # off the queue: not run again
    r = aioredis.Redis.from_url(redis_url)
    key = mk.evaluation(job_id) if kind == "evaluation" else mk.job(job_id)
    await r.hset(key, "deadline", repr(time.time() - 1))
    await r.aclose()
    job = await job_of(store, kind, mk, job_id)
    assert job["status"] == "failed" and job[error_field] == ORPHANED
    if kind == "nrest":  # no longer the model's pending job: a request queues a new one
        assert await store.noise.queue_estimate(mk) != job_id


@pytest.mark.parametrize("kind", KINDS)
async def test_a_job_is_started_once_and_a_reference_to_a_started_job_is_dropped(
        store: Store, redis_url: str, kind: str) -> None:
    _, queue_job, _ = KINDS[kind]
    first = await create_model(store, model_config("m1"))
    second = await create_model(store, model_config("m2"))
    stale, queue = await queue_job(store, first)
    fresh, _ = await queue_job(store, second)
    # a worker that died after marking the oldest running, before removing it from the queue
    r = aioredis.Redis.from_url(redis_url)
    key = first.evaluation(stale) if kind == "evaluation" else first.job(stale)
    await r.hset(key, mapping={"status": "running", "worker": "w-0"})
    taken = await queue.take("w-1", 10.0)
    assert taken is not None and (taken.model, taken.job_id) == ("m2", fresh)
    assert await r.llen(queue.queue) == 0
    assert (await job_of(store, kind, first, stale))["worker"] == "w-0"
    # a job queued twice (a worker that read it before another removed it) starts once
    other = await create_model(store, model_config("m3"))
    third, _ = await queue_job(store, other)
    (ref,) = await r.lrange(queue.queue, 0, -1)
    await r.lpush(queue.queue, ref)
    assert await queue.take("w-1", 10.0) is not None
    assert await queue.take("w-2", 10.0) is None
    assert (await job_of(store, kind, other, third))["worker"] == "w-1"
    await r.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_the_sweeper_queues_again_a_job_of_every_kind_whose_creator_died(
        store: Store, kind: str) -> None:
    """A job stored and staged whose reference never reached its queue is pushed again by
    the sweeper, whatever its kind: the sweeper reads the queues from the registry."""
    name, queue_job, _ = KINDS[kind]
    mk = await create_model(store, model_config())
    job_id, queue = await queue_job(store, mk)
    assert jobs.JOB_KINDS[name].queue(store).queue == queue.queue
    await store.redis.delete(queue.queue)  # the creator died before pushing it
    await store.redis.zadd(queue.staged(mk), {job_id: time.time() - 3600})
    await Worker(store, WorkerSettings(roles=("sweeper",), worker_id="w-1")).drain()
    taken = await queue.take("w-1", 10.0)
    assert taken is not None and (taken.model, taken.job_id) == (mk.model, job_id)


async def test_an_evaluation_whose_result_cannot_be_written_fails_naming_why(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result JSON cannot hold is the job's failure, never a job left running."""
    from app.store.jobs import QueuedJob
    from workers import evaluations

    mk = await create_model(store, model_config())
    job_id = await store.evaluations.queue(mk, {"policy": "uniform"})

    async def unwritable(*args: Any) -> dict[str, Any]:
        return {"value": object()}

    monkeypatch.setattr(evaluations, "run", unwritable)
    ctx = await Worker(store, WorkerSettings(roles=("jobs",), worker_id="e")).start()
    await evaluations.run_job(ctx, QueuedJob(mk.tenant, mk.model, job_id))
    job = await store.evaluations.get(mk, job_id)
    assert job is not None and job["status"] == "failed" and "TypeError" in job["error"]
    ctx.stopping.set()
