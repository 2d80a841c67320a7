"""Redis connection and the Lua scripts that run the atomic steps.

Every store module shares one :class:`redis.asyncio.Redis` client (binary
replies: blobs are bytes) created by :func:`connect` with short socket
timeouts, so that an unreachable Redis fails fast (the API turns that into a
503) and the pool reconnects by itself once Redis is back.
"""

from __future__ import annotations

from importlib import resources

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: Exceptions meaning "the store is unreachable right now" (incl. AOF loading).
STORE_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

SCRIPT_NAMES = ("create_model", "record_decisions", "take_feedback", "expire_decision",
                "publish_snapshot")


def connect(url: str, *, socket_timeout: float = 2.0, connect_timeout: float = 1.0,
            max_connections: int = 64) -> aioredis.Redis:
    """An asyncio Redis client with bounded timeouts (no connection is made yet)."""
    return aioredis.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        health_check_interval=15,
        max_connections=max_connections,
        decode_responses=False,
    )


def lua_source(name: str) -> str:
    """Source text of ``lua/<name>.lua``."""
    return resources.files("app.store").joinpath("lua", f"{name}.lua").read_text("utf-8")


class Scripts:
    """The Lua scripts of :data:`SCRIPT_NAMES`, registered on one client.

    redis-py sends EVALSHA and reloads a script on NOSCRIPT (e.g. after a
    Redis restart), also inside pipelines.
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(lua_source(name)) for name in SCRIPT_NAMES
        }

    def __getitem__(self, name: str) -> AsyncScript:
        return self._scripts[name]

    async def run(self, name: str, keys: list[str], args: list[bytes | str | int | float],
                  client: aioredis.Redis | Pipeline | None = None) -> object:
        """Run script ``name`` (on ``client`` if given, e.g. a pipeline)."""
        return await self._scripts[name](keys=keys, args=args, client=client)
