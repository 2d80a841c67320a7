"""Queued policy evaluations on a model's decision log.

``POST /v1/models/{id}/evaluations`` stores the request in a job hash
(``status`` "queued" -> "running" -> "done" or "failed", ``queued_at``,
``request`` JSON, the worker's ``started_at`` and ``deadline``, then ``result``
JSON or ``error``) expiring after a day,
and queues it on :data:`app.store.keys.EVALUATION_QUEUE`; a worker's
``jobs`` role takes the oldest (:attr:`EvaluationStore.jobs`, marking it
running: :mod:`app.store.jobs`), runs it and records the outcome.  A model
holds at most a given number of queued jobs (:class:`TooManyQueued`).
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store import keys
from app.store.jobs import JobQueue, orphaned
from app.store.keys import ModelKeys
from app.store.util import text, utc_now

#: Seconds a job's status is kept.
JOB_TTL_SECONDS = 86_400


class TooManyQueued(Exception):
    """The model already holds ``most`` queued evaluations (``held`` with the refused one):
    nothing was queued."""

    def __init__(self, held: int, most: int) -> None:
        super().__init__(f"{held} queued evaluations, at most {most}")
        self.held = held
        self.most = most


class EvaluationStore:
    """Queue, take and record policy evaluations."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.jobs = JobQueue(redis, keys.EVALUATION_QUEUE, ModelKeys.evaluation,
                             lambda mk: mk.evaluations_staged, JOB_TTL_SECONDS)

    async def queue(self, mk: ModelKeys, request: dict[str, Any], max_queued: int = 0) -> str:
        """Queue an evaluation of ``request`` (the route's validated body); its job id.
        ``max_queued`` (0: none): most evaluations the model may hold queued, the new one
        included; past it the job is removed before anyone can take it and
        :class:`TooManyQueued` raised (concurrent requests near the cap may all be refused,
        none passes it)."""
        job_id = secrets.token_urlsafe(12)
        key = mk.evaluation(job_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"status": "queued", "queued_at": utc_now(),
                                    "request": orjson.dumps(request)})
            pipe.expire(key, JOB_TTL_SECONDS)
            self.jobs.stage(pipe, mk, job_id)
            pipe.zcard(self.jobs.staged(mk))
            *_, held = await pipe.execute()
        if max_queued and int(held) > max_queued:
            async with self.redis.pipeline(transaction=True) as pipe:
                self.jobs.unstage(pipe, mk, job_id)
                await pipe.execute()
            raise TooManyQueued(int(held), max_queued)
        # the queue has a hash tag of its own (another Cluster slot): pushed after the job
        await self.jobs.push(mk, job_id)
        return job_id

    async def get(self, mk: ModelKeys, job_id: str) -> dict[str, str] | None:
        """A job's fields, or None when unknown or expired.  A job still ``running`` past
        its ``deadline`` (Unix seconds, set by the worker that took it) is ``failed``: that
        worker stopped without recording an outcome."""
        raw = await self.redis.hgetall(mk.evaluation(job_id))
        if not raw:
            return None
        job = {text(k) or "": text(v) or "" for k, v in raw.items()}
        orphaned(job)
        return job

    async def update(self, mk: ModelKeys, job_id: str, **fields: str) -> bool:
        """Set a job's fields (worker side); False when the job expired or its model is
        gone."""
        key = mk.evaluation(job_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.exists(key)
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(key, JOB_TTL_SECONDS)
            self.jobs.index(pipe, mk, job_id)
            existed, *_ = await pipe.execute()
        if not existed:
            await self.redis.delete(key)
        return bool(existed)
