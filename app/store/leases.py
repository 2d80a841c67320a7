"""Trainer leases (one owner per model at a time) and worker heartbeats.

A lease is the model's ``lease`` key holding the owner's worker id with a
millisecond expiry: taken with SET NX PX, renewed while the owner lives,
given back on a clean shutdown, and simply expiring when the owner dies, so
that another trainer takes the model over.  The publish script refuses a
snapshot from a worker that no longer holds the lease.

A heartbeat is one key per worker with an expiry (``noisyloop worker
--check`` reads it), plus, for trainers, a score in
:data:`keys.LIVE_TRAINERS` that lets the trainers count each other and
share the models evenly.  Times are Redis's clock, so hosts need not agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from app.store import keys
from app.store.client import lua_source, run_script
from app.store.keys import ModelKeys
from app.store.util import text

#: Worker ids (also the consumer names of the trainer group).
WORKER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def check_worker_id(worker_id: str) -> str:
    """Return ``worker_id`` if it matches :data:`WORKER_ID_PATTERN`, else raise ValueError."""
    if not WORKER_ID_PATTERN.match(worker_id):
        raise ValueError(f"worker id {worker_id!r} must match {WORKER_ID_PATTERN.pattern}")
    return worker_id


#: Models whose leases one Lua step takes or renews (on a single Redis).
TAKE_CHUNK = 500


class LeaseStore:
    """Take, renew and release per-model trainer leases (pipelined over models)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._take = redis.register_script(lua_source("lease_take"))
        self._take_many = redis.register_script(lua_source("lease_take_many"))
        self._release = redis.register_script(lua_source("lease_release"))

    async def take_many(self, models: Sequence[ModelKeys], owner: str, ttl_ms: int) -> list[bool]:
        """Take or renew the lease of each model; True where ``owner`` holds it now (False
        for a model that no longer exists)."""
        if not models:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            if isinstance(self.redis, RedisCluster):
                for mk in models:
                    await run_script(self._take, [mk.lease, mk.meta], [owner, int(ttl_ms)],
                                     pipe)
            else:  # one step per chunk of models: far less work than one step per model
                for at in range(0, len(models), TAKE_CHUNK):
                    chunk = models[at:at + TAKE_CHUNK]
                    await run_script(self._take_many,
                                     [key for mk in chunk for key in (mk.lease, mk.meta)],
                                     [owner, int(ttl_ms)], pipe)
            replies: Any = await pipe.execute()
        if isinstance(self.redis, RedisCluster):
            return [bool(int(r)) for r in replies]
        return [bool(int(r)) for chunk in replies for r in chunk]

    async def release_many(self, models: Sequence[ModelKeys], owner: str) -> None:
        """Give back the leases that ``owner`` still holds."""
        if not models:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in models:
                await run_script(self._release, [mk.lease], [owner], pipe)
            await pipe.execute()

    async def owners(self, models: Sequence[ModelKeys]) -> list[str | None]:
        """Current owner of each model's lease (None when free)."""
        if not models:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in models:
                pipe.get(mk.lease)
            replies: Any = await pipe.execute()
        return [text(r) for r in replies]


class HeartbeatStore:
    """Per-worker heartbeat keys and the index of live trainers."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def _now(self) -> float:
        sec, usec = await self.redis.time()
        return float(sec) + usec / 1e6

    async def beat(self, worker_id: str, ttl_seconds: float, info: dict[str, Any], *,
                   trainer: bool) -> None:
        """Refresh the worker's heartbeat (and its place among the live trainers)."""
        now = await self._now()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(keys.worker_heartbeat(worker_id), orjson.dumps({**info, "t": now}),
                     px=max(1, int(ttl_seconds * 1000)))
            if trainer:
                pipe.zadd(keys.LIVE_TRAINERS, {worker_id: now})
                pipe.zremrangebyscore(keys.LIVE_TRAINERS, "-inf", f"({now - ttl_seconds}")
            await pipe.execute()

    async def info(self, worker_id: str) -> dict[str, Any] | None:
        """What the worker wrote in its last heartbeat, or None when it expired."""
        raw: Any = await self.redis.get(keys.worker_heartbeat(worker_id))
        return orjson.loads(raw) if raw else None

    async def live_trainers(self, ttl_seconds: float) -> int:
        """How many trainers sent a heartbeat within ``ttl_seconds``."""
        now = await self._now()
        return int(await self.redis.zcount(keys.LIVE_TRAINERS, now - ttl_seconds, "+inf"))

    async def forget(self, worker_id: str) -> None:
        """Remove the worker's heartbeat at a clean shutdown."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(keys.worker_heartbeat(worker_id))
            pipe.zrem(keys.LIVE_TRAINERS, worker_id)
            await pipe.execute()
