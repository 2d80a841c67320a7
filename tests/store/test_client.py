"""The Redis client of the store: a burst beyond the pool waits for a connection; commands
are packed by hiredis into the bytes redis-py would send."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from app.store.client import JOIN_MIN_ARGS, STORE_ERRORS, ScriptBatch, connect


@pytest.mark.slow
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
    ("SET", bytearray(b"k"), memoryview(b"\x00v")),  # hiredis refuses these: redis-py packs
])
def test_hiredis_packing_gives_redis_pys_bytes(args: tuple[object, ...]) -> None:
    fast = connect("redis://127.0.0.1:1/0").connection_pool.make_connection()
    plain = aioredis.Connection()
    assert type(fast).__name__ == "HiredisPackingConnection"
    assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args))


async def test_new_connections_do_not_read_package_metadata(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # redis-py >= 7.2 looks its version up in the installed packages' metadata for each
    # new connection unless told it; that blocked the event loop 20-50 ms per connection
    def no_lookup(*_: object) -> str:
        raise AssertionError("package metadata read while opening a connection")

    monkeypatch.setattr("redis.utils.get_lib_version", no_lookup)
    client = connect(redis_url, max_connections=8)
    try:
        # 8 concurrent pops open 8 connections (each would have failed on the lookup)
        pops = await asyncio.gather(*(client.blpop([f"none-{i}"], timeout=0.01)
                                      for i in range(8)))
        assert pops == [None] * 8
    finally:
        await client.aclose()


async def test_hiredis_packed_commands_round_trip(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        await client.set("k", b"\x00\xff\r\n")
        assert await client.get("k") == b"\x00\xff\r\n"
        await client.hset("h", mapping={"f": 1.25, "é": "ü"})
        assert await client.hgetall("h") == {b"f": b"1.25", "é".encode(): "ü".encode()}
    finally:
        await client.aclose()


ECHO = "if ARGV[1] == 'fail' then return redis.error_reply('failed') end return ARGV[1]"


class _AnyResponseError:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResponseError)


ANY_ERROR = _AnyResponseError()


async def _connected_clients(redis_url: str) -> int:
    probe = aioredis.Redis.from_url(redis_url)
    try:
        return int((await probe.info("clients"))["connected_clients"])
    finally:
        await probe.aclose()


@pytest.fixture
async def echo(redis_url: str) -> AsyncIterator[tuple[aioredis.Redis, ScriptBatch]]:
    """A store client and a :class:`ScriptBatch` of :data:`ECHO` on it."""
    client = connect(redis_url)
    yield client, ScriptBatch(client.register_script(ECHO))
    await client.aclose()


async def test_script_batch_answers_each_caller_over_one_connection(
        redis_url: str, echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    client, batch = echo
    await client.script_load(ECHO)  # opens the pool's first connection
    before = await _connected_clients(redis_url)
    replies = await asyncio.gather(*(batch.run(["k"], [f"v{i}"]) for i in range(20)),
                                   return_exceptions=True)
    assert replies == [f"v{i}".encode() for i in range(20)]
    # the first call went alone (nothing was in flight) on a connection the batch took from
    # the pool and keeps, the 19 others in one pipeline on the pool's first connection;
    # 20 concurrent plain calls would have opened 19 more
    assert await _connected_clients(redis_url) - before == 1


async def test_script_batch_keeps_errors_to_their_callers(
        echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    _, batch = echo
    replies = await asyncio.gather(batch.run(["k"], ["a"]), batch.run(["k"], ["fail"]),
                                   batch.run(["k"], ["b"]), return_exceptions=True)
    assert replies[0] == b"a" and replies[2] == b"b"
    assert isinstance(replies[1], ResponseError) and "failed" in str(replies[1])


async def test_script_batch_reloads_a_lost_script(
        echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    client, batch = echo
    assert await batch.run(["k"], ["x"]) == b"x"
    await client.script_flush()  # as after a Redis restart
    assert await batch.run(["k"], ["y"]) == b"y"  # alone
    await client.script_flush()
    # "u" alone, "v" a batch of one (queued while "u" was in flight)
    assert await asyncio.gather(batch.run(["k"], ["u"]), batch.run(["k"], ["v"])) == \
        [b"u", b"v"]
    await client.script_flush()
    # a pipelined batch whose every call meets NOSCRIPT (called directly: in a real turn,
    # a lone call in flight may reload the script before the pipeline goes out)
    assert await batch._replies([(["k"], ["z"]), (["k"], ["fail"]), (["k"], ["w"])]) == \
        [b"z", ANY_ERROR, b"w"]


async def test_a_lone_call_survives_its_kept_connection_being_closed(
        echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    client, batch = echo
    assert await batch.run(["k"], ["a"]) == b"a"
    # every connection but the one asking: the batch's kept one too (as a Redis restart does)
    assert await client.client_kill_filter(_type="normal", skipme=True) >= 1
    assert await batch.run(["k"], ["b"]) == b"b"
    assert await batch.run(["k"], ["c"]) == b"c"  # the kept connection reconnected


async def test_a_cancelled_lone_call_leaves_no_reply_for_the_next(
        echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    _, batch = echo
    assert await batch.run(["k"], ["warm"]) == b"warm"
    for turns in range(1, 6):  # cancelled before, while and after its command is sent
        call = asyncio.ensure_future(batch.run(["k"], [f"cancelled-{turns}"]))
        for _ in range(turns):
            await asyncio.sleep(0)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        assert await batch.run(["k"], [f"next-{turns}"]) == f"next-{turns}".encode()


async def test_a_cancelled_caller_does_not_strand_the_batch(
        echo: tuple[aioredis.Redis, ScriptBatch]) -> None:
    _, batch = echo
    alone = asyncio.ensure_future(batch.run(["k"], ["a"]))
    queued = [asyncio.ensure_future(batch.run(["k"], [v])) for v in "bc"]
    await asyncio.sleep(0)  # "a" in flight alone, "b" and "c" queued, their send not yet run
    queued[0].cancel()
    assert await asyncio.wait_for(queued[1], 5) == b"c"
    assert await alone == b"a" and queued[0].cancelled()


async def test_every_caller_gets_the_error_of_an_unreachable_store() -> None:
    with socket.socket() as s:  # a port with nothing behind it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = connect(f"redis://127.0.0.1:{port}/0", socket_timeout=0.5, connect_timeout=0.5)
    try:
        batch = ScriptBatch(client.register_script(ECHO))
        replies = await asyncio.gather(batch.run(["k"], ["a"]), batch.run(["k"], ["b"]),
                                       return_exceptions=True)
        assert all(isinstance(r, STORE_ERRORS) for r in replies)
    finally:
        await client.aclose()


@st.composite
def row_commands(draw: st.DrawFn) -> tuple[object, ...]:
    """A command, a key and more than :data:`JOIN_MIN_ARGS` arguments: mostly bytes rows of
    one length (what :func:`pack_with_rows` joins), sometimes of two lengths or with a str,
    int or float among them (what it leaves to hiredis)."""
    size = draw(st.integers(0, 40))
    n = draw(st.integers(JOIN_MIN_ARGS - 1, 3 * JOIN_MIN_ARGS))
    rows: list[object] = [draw(st.binary(min_size=size, max_size=size)) for _ in range(n)]
    if draw(st.booleans()):
        at = draw(st.integers(0, n - 1))
        rows[at] = draw(st.one_of(st.binary(), st.text(), st.integers(), st.floats(
            allow_nan=False, allow_infinity=False)))
    command = draw(st.sampled_from(["RPUSH", b"SADD", "EVALSHA"]))
    key = draw(st.one_of(st.text(min_size=1), st.binary(min_size=1)))
    return (command, key, *rows)


@settings(max_examples=200, deadline=None)
@given(args=row_commands())
def test_rows_packed_by_one_join_give_redis_pys_bytes(args: tuple[object, ...]) -> None:
    fast = connect("redis://127.0.0.1:1/0").connection_pool.make_connection()
    plain = aioredis.Connection()
    assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args))
