"""Per-model quality time series: one JSON point per recording, the newest few thousand kept.

The model's trainer (the one writer, under its lease) appends a point at
most every few seconds (:mod:`workers.series` decides when and what it
holds); ``GET /v1/models/{id}/series`` reads them back, oldest first.  The
series is a capped Redis list: appending and cutting it to the newest
``cap`` points is one round trip, so it never grows past ``cap``.
:meth:`SeriesStore.newest` reads it back from the newest point a few at a time
(a rank model's point holds a line per slot), for pages bounded by bytes
(:mod:`app.store.paging`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store.client import Scripts
from app.store.keys import ModelKeys
from app.store.models import UNAPPLIED_SCAN
from app.store.nrest import ANCHOR_FIELD

#: Points kept per model (the newest).
SERIES_MAX = 2000
#: Points per read of :meth:`SeriesStore.newest`.
POINTS_PER_READ = 100


@dataclass(frozen=True)
class SeriesContext:
    """What a point reports beside the trainer's own counters, read from the model's keys."""

    pending: int
    """Decisions awaiting feedback."""
    backlog: int
    """Accepted events not applied yet (:attr:`~app.store.models.ModelRecord.backlog`)."""
    anchor: dict[str, Any] | None
    """The last anchor estimate's outcome (status, interval), None before the first."""


class SeriesStore:
    """Append and read a model's quality series."""

    def __init__(self, redis: aioredis.Redis, scripts: Scripts) -> None:
        self.redis = redis
        self.scripts = scripts

    async def context(self, mk: ModelKeys) -> SeriesContext:
        """Pending decisions, unapplied events and the last anchor outcome (one round trip)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcard(mk.pending)
            await self.scripts.run("unapplied_events", [mk.events, mk.snapshot],
                                   [UNAPPLIED_SCAN], pipe)
            pipe.hget(mk.noise, ANCHOR_FIELD)
            pending, backlog, anchor = await pipe.execute()
        return SeriesContext(int(pending), int(backlog),
                             orjson.loads(anchor) if anchor else None)

    async def append(self, mk: ModelKeys, point: dict[str, Any], cap: int = SERIES_MAX) -> None:
        """Append ``point`` (JSON-ready) and keep the newest ``cap`` points."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(mk.series, orjson.dumps(point))
            pipe.ltrim(mk.series, -cap, -1)
            await pipe.execute()

    async def read(self, mk: ModelKeys, limit: int = SERIES_MAX) -> list[dict[str, Any]]:
        """The newest ``limit`` points, oldest first."""
        raw: Any = await self.redis.lrange(mk.series, -limit, -1)
        return [orjson.loads(item) for item in raw]

    async def newest(self, mk: ModelKeys, before: float | None = None
                     ) -> AsyncGenerator[dict[str, Any], None]:
        """The points older than ``before`` (their ``t``, Unix seconds; None: every point),
        newest first, read :data:`POINTS_PER_READ` at a time.  A point appended between two
        reads shifts the list by one: a point read twice is skipped (the times of a series
        increase)."""
        end, last = -1, before
        while True:
            raw: Any = await self.redis.lrange(mk.series, end - POINTS_PER_READ + 1, end)
            for item in reversed(raw):
                point = orjson.loads(item)
                if last is None or point["t"] < last:
                    last = point["t"]
                    yield point
            if len(raw) < POINTS_PER_READ:
                return
            end -= POINTS_PER_READ
