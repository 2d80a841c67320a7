"""Reports a client names: a model's feature importances and named evaluations (the
Personalizer routes), JSON per report by the id the client gave it, in one hash of the
model per kind (:attr:`~app.store.keys.ModelKeys.feature_importances`,
:attr:`~app.store.keys.ModelKeys.named_evaluations`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store.keys import ModelKeys

#: Most reports of one kind a model keeps (a new one past it is refused until one is
#: deleted).
MAX_REPORTS = 100


class ReportStore:
    """One kind of named report of each model, in the hash ``key(mk)``."""

    def __init__(self, redis: aioredis.Redis, key: Callable[[ModelKeys], str]) -> None:
        self._redis = redis
        self._key = key

    async def add(self, mk: ModelKeys, report_id: str, report: dict[str, Any]) -> str:
        """Store a new report: "ok", "exists" (the id is taken) or "full"
        (:data:`MAX_REPORTS` held)."""
        key = self._key(mk)
        if await self._redis.hexists(key, report_id):
            return "exists"
        if await self._redis.hlen(key) >= MAX_REPORTS:
            return "full"
        added = await self._redis.hsetnx(key, report_id, orjson.dumps(report))
        return "ok" if added else "exists"

    async def replace(self, mk: ModelKeys, report_id: str, report: dict[str, Any]) -> bool:
        """Overwrite a report that exists (False: it was deleted meanwhile, nothing written)."""
        script = ("if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then "
                  "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) + 1 end return 0")
        done = await self._redis.eval(script, 1, self._key(mk), report_id,
                                      orjson.dumps(report))
        return bool(done)

    async def get(self, mk: ModelKeys, report_id: str) -> dict[str, Any] | None:
        """One report, or None."""
        raw = await self._redis.hget(self._key(mk), report_id)
        return None if raw is None else dict(orjson.loads(raw))

    async def all(self, mk: ModelKeys) -> list[dict[str, Any]]:
        """Every report, oldest first."""
        raw: Any = await self._redis.hvals(self._key(mk))
        reports = [dict(orjson.loads(r)) for r in raw]
        return sorted(reports, key=lambda r: (r.get("creationTime", ""), r.get("id", "")))

    async def delete(self, mk: ModelKeys, report_id: str) -> bool:
        """Remove a report; False if there was none."""
        return bool(await self._redis.hdel(self._key(mk), report_id))
