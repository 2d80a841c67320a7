"""The Redis client of the store: a burst beyond the pool waits for a connection."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from app.store.client import connect


async def test_more_concurrent_commands_than_connections_wait_instead_of_failing(
        redis_url: str) -> None:
    redis = connect(redis_url, max_connections=4)
    try:
        # 40 blocking pops of 0.05 s at once on 4 connections: 10 waves, none refused
        results = await asyncio.gather(*(redis.blpop([f"empty-{i}"], timeout=0.05)
                                         for i in range(40)))
        assert results == [None] * 40
    finally:
        await redis.aclose()


async def test_a_command_that_cannot_get_a_connection_in_time_fails_as_unreachable(
        redis_url: str) -> None:
    redis = connect(redis_url, max_connections=1, socket_timeout=0.2)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            await pipe.watch("k")  # holds the pool's only connection until the pipe resets
            with pytest.raises(RedisConnectionError):
                await redis.get("x")  # waits 0.2 s for a connection, then gives up
        assert await redis.get("x") is None  # the connection is back
    finally:
        await redis.aclose()
