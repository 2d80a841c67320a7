"""A model's feature-importance reports, by the id the client gave each (JSON per report,
in one hash of the model: :attr:`~app.store.keys.ModelKeys.feature_importances`)."""

from __future__ import annotations

from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store.keys import ModelKeys

#: Most reports a model keeps (a new one past it is refused until one is deleted).
MAX_REPORTS = 100


class ImportanceStore:
    """Feature-importance reports of each model."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def add(self, mk: ModelKeys, report_id: str, report: dict[str, Any]) -> str:
        """Store a new report: "ok", "exists" (the id is taken) or "full"
        (:data:`MAX_REPORTS` held)."""
        if await self._redis.hexists(mk.feature_importances, report_id):
            return "exists"
        if await self._redis.hlen(mk.feature_importances) >= MAX_REPORTS:
            return "full"
        added = await self._redis.hsetnx(mk.feature_importances, report_id,
                                         orjson.dumps(report))
        return "ok" if added else "exists"

    async def get(self, mk: ModelKeys, report_id: str) -> dict[str, Any] | None:
        """One report, or None."""
        raw = await self._redis.hget(mk.feature_importances, report_id)
        return None if raw is None else dict(orjson.loads(raw))

    async def all(self, mk: ModelKeys) -> list[dict[str, Any]]:
        """Every report, oldest first."""
        raw: Any = await self._redis.hvals(mk.feature_importances)
        reports = [dict(orjson.loads(r)) for r in raw]
        return sorted(reports, key=lambda r: (r.get("creationTime", ""), r.get("id", "")))

    async def delete(self, mk: ModelKeys, report_id: str) -> bool:
        """Remove a report; False if there was none."""
        return bool(await self._redis.hdel(mk.feature_importances, report_id))
