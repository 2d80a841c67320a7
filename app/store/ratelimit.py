"""Per-tenant rate limits: a token bucket in Redis, shared by every API replica.

One Lua step per request (:file:`lua/rate_limit.lua`) refills the tenant's
bucket for the time elapsed on the Redis clock (so replicas with skewed
clocks agree), takes the request's cost, or says how long to wait.  The key
(:func:`app.store.keys.rate_bucket`) carries its own hash tag and expires
once the bucket would be full again.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from app.store import keys
from app.store.client import lua_source, run_script


class RateLimitStore:
    """Token buckets of the tenants."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._script = redis.register_script(lua_source("rate_limit"))

    async def take(self, tenant: str, rate: float, burst: int, cost: int = 1) -> float:
        """Take ``cost`` tokens of ``tenant``'s bucket; 0.0 when allowed, else the seconds
        to wait before the request would be allowed."""
        reply: Any = await run_script(self._script, [keys.rate_bucket(tenant)],
                                      [repr(float(rate)), int(burst), int(cost)])
        allowed, wait_ms = int(reply[0]), int(reply[1])
        return 0.0 if allowed else max(wait_ms, 1) / 1000.0
