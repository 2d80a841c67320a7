"""The Redis client of the store: a burst beyond the pool waits for a connection; commands
are packed by hiredis into the bytes redis-py would send."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
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


@pytest.mark.parametrize("args", [
    ("EVALSHA", "a" * 40, 2, "nl:{t:m}:stats", "nl:{t:m}:ctx:é", b"\x00\xff\r\n", 1.5, 1e-7,
     10**15, -3, ""),
    ("CONFIG GET", "maxmemory"),  # a command name of two words is split, as redis-py does
    (b"CLIENT SETNAME", b"x"),
])
def test_hiredis_packing_gives_redis_pys_bytes(args: tuple[object, ...]) -> None:
    fast = connect("redis://127.0.0.1:1/0").connection_pool.make_connection()
    plain = aioredis.Connection()
    assert type(fast).__name__ == "HiredisPackingConnection"
    assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args))


async def test_hiredis_packed_commands_round_trip(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        await client.set("k", b"\x00\xff\r\n")
        assert await client.get("k") == b"\x00\xff\r\n"
        await client.hset("h", mapping={"f": 1.25, "é": "ü"})
        assert await client.hgetall("h") == {b"f": b"1.25", "é".encode(): "ü".encode()}
    finally:
        await client.aclose()
