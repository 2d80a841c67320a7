"""Per-model drift detector state: the detector's arrays and what it last reported.

The model's trainer (the one writer, under its lease) saves the detector
after every published batch (:mod:`workers.drift`); ``GET /v1/models/{id}``
reads the report back.  One hash: ``state`` (codec arrays) and ``report``
(JSON: status, detections, when the last one was raised, the statistic, the
signal and threshold in use).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.store import codec
from app.store.keys import ModelKeys


class DriftStore:
    """Save and read a model's drift detector."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def load(self, mk: ModelKeys) -> tuple[dict[str, np.ndarray] | None,
                                                 dict[str, Any] | None]:
        """The detector's arrays and its last report (None, None before the first save)."""
        raw: Any = await self.redis.hmget(mk.drift, ["state", "report"])
        state, report = raw
        return (codec.decode(state) if state else None,
                orjson.loads(report) if report else None)

    async def report(self, mk: ModelKeys) -> dict[str, Any] | None:
        """The last report (None before the first batch)."""
        raw: Any = await self.redis.hget(mk.drift, "report")
        return orjson.loads(raw) if raw else None

    async def save(self, mk: ModelKeys, state: dict[str, np.ndarray],
                   report: dict[str, Any]) -> None:
        """Replace the detector's arrays and report (one round trip)."""
        await self.redis.hset(mk.drift, mapping={"state": codec.encode(state),
                                                 "report": orjson.dumps(report)})
