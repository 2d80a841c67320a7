"""Queues of the jobs the worker's ``jobs`` role runs (NREst runs, policy evaluations).

A job is a hash in its model's slot (``status`` "queued" -> "running" ->
"done" or "failed", with the job's own fields) and its reference
``"tenant/model/job"`` on a queue list in the ``{jobs}`` slot, pushed on the
left, taken from the right (the oldest first).

:meth:`JobQueue.take` marks the oldest job ``running`` (with the worker's id,
``started_at`` and a ``deadline``) before it removes the reference from the
queue; the two keys are in different Cluster slots, so this order, not one
script, makes a take safe against a worker that dies in the middle: before
the mark the job is still queued and on the queue; after it, the job is
running with a deadline, and :func:`orphaned` reads it as failed once that
passed.  A reference whose job is no longer queued (started by another worker,
or by one that died before removing it) is dropped by the next take.

Creating a job is two steps for the same reason: its hash, with its id on the
model's *staged* sorted set (:meth:`JobQueue.stage`, in the same transaction:
one slot), then the reference on the queue.  A creator that dies between them
leaves a job ``queued`` that no worker would take; the sweeper's
:meth:`JobQueue.requeue_stale` pushes the reference of every job still queued
:data:`REQUEUE_AFTER_SECONDS` after it was staged and found on no queue, and
forgets the staged ids of jobs no longer queued.  A reference pushed twice is
harmless: the take after the first drops it.  A take removes the job's id from
the staged set, so the set holds the model's queued jobs (what
:meth:`JobQueue.unstage` and a cap on them count).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from app.store import keys
from app.store.client import lua_source
from app.store.keys import ModelKeys
from app.store.util import text, utc_now

#: Seconds past the worker's timeout after which a running job whose worker died is failed.
DEADLINE_MARGIN_SECONDS = 60.0
#: Why a job whose deadline passed while it was running failed.
ORPHANED = "the worker running it stopped before it finished"
#: Seconds after which a job still queued but on no queue is pushed again (its creator died
#: between storing it and queueing it).
REQUEUE_AFTER_SECONDS = 60.0
#: Seconds past its expiry after which an entry leaves a model's job index.
INDEX_MARGIN_SECONDS = 3600.0


def index_expiring(pipe: aioredis.client.Pipeline, mk: ModelKeys, key: str,
                   ttl_seconds: float) -> None:
    """Queue, in ``pipe`` that gives the model's ``key`` an expiry of ``ttl_seconds``, the key
    on :attr:`~app.store.keys.ModelKeys.job_index` scored by that expiry (how a model delete
    finds it without a scan), and the removal of the entries :data:`INDEX_MARGIN_SECONDS` past
    theirs (the margin covers clocks that disagree)."""
    now = time.time()
    pipe.zadd(mk.job_index, {key: now + ttl_seconds})
    pipe.zremrangebyscore(mk.job_index, "-inf", f"({now - INDEX_MARGIN_SECONDS}")


@dataclass(frozen=True)
class QueuedJob:
    """One taken job: its model and id."""

    tenant: str
    model: str
    job_id: str

    @property
    def keys(self) -> ModelKeys:
        return ModelKeys(self.tenant, self.model)


def orphaned(job: dict[str, str], error_field: str = "error") -> bool:
    """Whether ``job`` (its fields) is ``running`` past its ``deadline``: its worker stopped
    without recording an outcome.  Then it is marked ``failed`` in ``job`` (not stored), with
    :data:`ORPHANED` in ``error_field``."""
    if job.get("status") != "running" or float(job.get("deadline") or "inf") >= time.time():
        return False
    job.update({"status": "failed", error_field: ORPHANED})
    return True


class JobQueue:
    """One queue of jobs: ``queue`` the list's key, ``job_key`` the key of a job's hash,
    ``staged`` that of a model's staged job ids (module docstring)."""

    def __init__(self, redis: aioredis.Redis, queue: str,
                 job_key: Callable[[ModelKeys, str], str],
                 staged: Callable[[ModelKeys], str], ttl: int) -> None:
        self.redis = redis
        self.queue = queue
        self.job_key = job_key
        self.staged = staged
        self.ttl = ttl
        self._start = redis.register_script(lua_source("job_start"))

    def stage(self, pipe: aioredis.client.Pipeline, mk: ModelKeys, job_id: str) -> None:
        """Queue, in the transaction ``pipe`` that stores the job's hash (expiring in
        :attr:`ttl` seconds), its id on the model's staged set and its key on the model's job
        index (see :meth:`index`)."""
        pipe.zadd(self.staged(mk), {job_id: time.time()})
        self.index(pipe, mk, job_id)

    def unstage(self, pipe: aioredis.client.Pipeline, mk: ModelKeys, job_id: str) -> None:
        """Queue, in ``pipe``, the removal of a job staged but never pushed: its hash, its
        id on the staged set and its key on the job index."""
        key = self.job_key(mk, job_id)
        pipe.delete(key)
        pipe.zrem(self.staged(mk), job_id)
        pipe.zrem(mk.job_index, key)

    def index(self, pipe: aioredis.client.Pipeline, mk: ModelKeys, job_id: str) -> None:
        """Queue, in ``pipe`` that gives a job's hash an expiry of :attr:`ttl` seconds, its key
        on :attr:`~app.store.keys.ModelKeys.job_index` scored by that expiry (how a model
        delete finds it), and the removal of the entries :data:`INDEX_MARGIN_SECONDS` past
        theirs (the margin covers clocks that disagree)."""
        index_expiring(pipe, mk, self.job_key(mk, job_id), self.ttl)

    @staticmethod
    def _ref(mk: ModelKeys, job_id: str) -> str:
        return f"{keys.model_ref(mk.tenant, mk.model)}{keys.MODEL_SEP}{job_id}"

    async def push(self, mk: ModelKeys, job_id: str) -> None:
        """Queue a job whose hash (status ``queued``) is stored."""
        await self.redis.lpush(self.queue, self._ref(mk, job_id))

    async def requeue_stale(self, models: Sequence[ModelKeys],
                            after: float = REQUEUE_AFTER_SECONDS) -> int:
        """Push again each job of ``models`` still ``queued`` ``after`` seconds after it was
        staged and on no queue; forget the staged ids of jobs no longer queued (module
        docstring).  Returns the jobs pushed again."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in models:
                pipe.zrangebyscore(self.staged(mk), "-inf", time.time() - after)
            stale: list[Any] = await pipe.execute()
        pushed = 0
        for mk, ids in zip(models, stale, strict=True):
            for job_id in map(text, ids):
                assert job_id is not None
                if text(await self.redis.hget(self.job_key(mk, job_id), "status")) != "queued":
                    await self.redis.zrem(self.staged(mk), job_id)
                elif await self.redis.lpos(self.queue, self._ref(mk, job_id)) is None:
                    await self.push(mk, job_id)
                    pushed += 1
        return pushed

    async def take(self, worker_id: str, timeout: float) -> QueuedJob | None:
        """The oldest queued job, marked ``running`` by ``worker_id`` with a deadline
        ``timeout`` + :data:`DEADLINE_MARGIN_SECONDS` from now; None when none is queued."""
        while True:
            raw: Any = await self.redis.lindex(self.queue, -1)
            if raw is None:
                return None
            ref, _, job_id = (text(raw) or "").rpartition(keys.MODEL_SEP)
            job = QueuedJob(*keys.split_model_ref(ref), job_id)
            started = await self._start(
                keys=[self.job_key(job.keys, job_id), self.staged(job.keys)],
                args=[worker_id, utc_now(), repr(time.time() + timeout + DEADLINE_MARGIN_SECONDS),
                      job_id])
            await self.redis.lrem(self.queue, -1, raw)
            if started:
                return job
