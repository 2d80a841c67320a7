"""Redis connection and the Lua scripts that run the atomic steps.

Every store module shares one client (binary replies: blobs are bytes)
created by :func:`connect` with short socket timeouts, so that an
unreachable Redis fails fast (the API turns that into a 503) and the pool
reconnects by itself once Redis is back.

A URL ``redis+cluster://host:port[,host:port...]`` (or ``rediss+cluster://``)
selects a Redis Cluster: :func:`connect` then returns a
:class:`redis.asyncio.cluster.RedisCluster` seeded with those nodes, which
speaks the same commands and routes each one by its key's slot.  The store
keeps every multi-key step (Lua script, MULTI/EXEC) on the keys of one hash
tag (:mod:`app.store.keys`), so each runs on one shard; pipelines without
MULTI may mix tags (the cluster client splits them per node).  Scripts
queued on a cluster pipeline go as EVAL with their source (redis-py refuses
EVALSHA there, and a node that lost its script cache cannot answer NOSCRIPT
inside a pipeline); see :func:`run_script`.
"""

from __future__ import annotations

import asyncio
import re
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hiredis
import redis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.connection import HiredisRespSerializer
from redis.driver_info import DriverInfo
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: Exceptions meaning "the store is unreachable right now" (incl. AOF loading).
STORE_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

SCRIPT_NAMES = ("create_model", "record_decisions", "take_feedback", "expire_decision",
                "publish_snapshot", "activate_decision", "unapplied_events")


#: URL schemes of a Redis Cluster, mapped to the scheme of one node.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    """True for ``redis+cluster://`` and ``rediss+cluster://`` URLs."""
    return url.split("://", 1)[0] in CLUSTER_SCHEMES


#: What each new connection reports in ``CLIENT SETINFO``, with the version given: left
#: unset, redis-py (>= 7.2) reads it from the package metadata on every new connection,
#: 20-50 ms on this machine with the event loop blocked (seen as serve stalls while the
#: pool grew under a burst).
DRIVER_INFO = DriverInfo(lib_version=redis.__version__)


def connect(url: str, *, socket_timeout: float = 2.0, connect_timeout: float = 1.0,
            max_connections: int = 64) -> aioredis.Redis:
    """An asyncio Redis (or Redis Cluster) client with bounded timeouts (no connection yet).

    ``max_connections`` is per server (per node on a cluster).
    """
    options: dict[str, Any] = {"socket_timeout": socket_timeout,
                               "socket_connect_timeout": connect_timeout,
                               "max_connections": max_connections, "decode_responses": False,
                               "driver_info": DRIVER_INFO}
    if is_cluster_url(url):
        return connect_cluster(url, **options)
    # One immediate retry on a connection error: after a Redis restart every pooled
    # connection is dead and fails once ("Connection closed by server") before the
    # pool reconnects.  Timeouts are not retried, so a slow Redis still answers 503
    # within one socket timeout.  A retried Lua step is safe: each one checks its own
    # effect (a feedback already taken answers "duplicate", never a second append).
    #
    # A blocking pool: past ``max_connections`` busy connections a command waits (up to
    # one socket timeout) for a free one instead of failing at once with "Too many
    # connections" -- a burst of concurrent requests or WebSocket messages queues
    # briefly rather than answering 503 and stalling the in-process trainer.
    pool = aioredis.BlockingConnectionPool.from_url(
        url, timeout=socket_timeout, health_check_interval=15,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        retry_on_error=[RedisConnectionError], **options)
    pool.connection_class = _with_hiredis_packing(pool.connection_class)
    return aioredis.Redis.from_pool(pool)


class _HiredisPacking:
    """Connection mixin: commands packed by hiredis' C packer.

    redis-py's asyncio connection packs every argument in Python (its sync
    connection uses hiredis when installed): 22 arguments of a single
    predict's Lua step cost more CPU than the decision itself.  The packed
    bytes are the same (str as UTF-8, int and float as ``str``/``repr``).
    """

    _serializer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        """``args`` packed by hiredis at once.  redis-py's serializer, which first scans
        every argument in Python (2,000 of them in a 1,000-event feedback batch), does
        only the rare cases: a command name of two words, bytearray or memoryview
        arguments (hiredis refuses those with a TypeError)."""
        command = args[0]
        if (b" " if isinstance(command, bytes) else " ") not in command:
            try:
                if len(args) > JOIN_MIN_ARGS:
                    joined = pack_with_rows(args)
                    if joined is not None:
                        return joined
                return [hiredis.pack_command(args)]
            except TypeError:
                pass
        packed: list[bytes] = self._serializer.pack(*args)
        return packed


#: Arguments above which :func:`pack_with_rows` is tried (a batch of encoded rows).
JOIN_MIN_ARGS = 64


def pack_with_rows(args: tuple[Any, ...]) -> list[bytes] | None:
    """``hiredis.pack_command(args)`` for a command and key followed by bytes arguments of one
    length (a batch of encoded rows, e.g. the trainer's ``RPUSH`` of NREst samples), with
    the rows packed by one join; None for any other command.

    hiredis copies such arguments one by one (about 1.5 us per 600-byte row, a quarter of
    the trainer's cost per event); their RESP headers are all ``$size``, so one
    ``bytes.join`` lays them out at memory speed.

    >>> rows = (b"ab", b"cd")
    >>> pack_with_rows(("RPUSH", "k", *rows)) == [hiredis.pack_command(("RPUSH", "k", *rows))]
    True
    """
    rows = args[2:]
    if not rows or set(map(type, rows)) != {bytes}:
        return None
    sizes = set(map(len, rows))
    if len(sizes) != 1:
        return None
    head = hiredis.pack_command(args[:2])
    sep = b"\r\n$%d\r\n" % sizes.pop()
    count = b"*%d\r\n" % len(args)
    return [count + head[head.index(b"\r\n") + 2:] + sep[2:] + sep.join(rows) + b"\r\n"]


def _with_hiredis_packing(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` (TCP, TLS or Unix socket) with :class:`_HiredisPacking`."""
    return type(f"HiredisPacking{connection_class.__name__}",
                (_HiredisPacking, connection_class), {})


def connect_cluster(url: str, **options: Any) -> aioredis.Redis:
    """A :class:`RedisCluster` client for ``redis+cluster://[user:pw@]h1:p1[,h2:p2...]``.

    Every listed node is a startup node (the client discovers the others
    from whichever answers first).  The result is typed as a plain client:
    the store only uses commands both implement.
    """
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    seeds = [h for h in hosts.split(",") if h]
    if not seeds:
        raise ValueError(f"no cluster node in {url!r}")
    netloc = f"{userinfo}@{seeds[0]}" if userinfo else seeds[0]
    first = urlunsplit((CLUSTER_SCHEMES[parts.scheme], netloc, "", parts.query, ""))
    others = [ClusterNode(*_host_port(seed)) for seed in seeds[1:]]
    cluster = RedisCluster.from_url(first, startup_nodes=others or None, **options)
    return cluster  # type: ignore[return-value]  # same command API as Redis


def _host_port(seed: str) -> tuple[str, int]:
    host, _, port = seed.rpartition(":")
    return host.strip("[]"), int(port)


async def run_script(script: AsyncScript, keys: list[str],
                     args: list[bytes | str | int | float], client: Any = None) -> object:
    """Run ``script`` on its client, or queue it on ``client`` (a pipeline).

    On a cluster pipeline the script is queued as EVAL with its source (its
    keys share one hash tag, so it runs on one shard).  A cluster pipeline's
    queued command must not be awaited: awaiting it re-initialises the
    pipeline and drops what was queued.
    """
    if isinstance(client, ClusterPipeline):
        return client.eval(script.script, len(keys), *keys, *args)  # type: ignore[arg-type]
    return await script(keys=keys, args=args, client=client)


class ScriptBatch:
    """Concurrent runs of one Lua script, sent together: one pipeline per event-loop turn.

    A call that finds nothing queued and nothing in flight goes straight to
    Redis as a plain EVALSHA (a lone request, the usual case at low rates,
    pays nothing for batching), on a connection the batch keeps for such
    calls: no pool checkout and none of the command layer's wrappers, which
    cost about as much client CPU as the round trip itself
    (:meth:`_lone_call`).  Otherwise the first queued call of a loop turn
    schedules a send at the end of that turn (``call_soon``) and every call
    made before it runs joins the batch: a batch of one goes as a plain
    EVALSHA, a larger one as one non-transactional pipeline, one connection
    checkout and one round trip for all, which costs a third of the client
    CPU per call at eight calls per batch (``docs/benchmarks/service.md``).
    Each caller gets its own reply or error; a script that Redis lost
    (NOSCRIPT, e.g. after a restart) is loaded and its calls run again one
    by one.  The send runs in a task of its own, so a cancelled caller never
    strands the others.  For a single Redis (a Redis Cluster client splits
    pipelines by node, and the store sends scripts there as EVAL, see
    :func:`run_script`).
    """

    def __init__(self, script: AsyncScript) -> None:
        self._script = script
        self._queue: list[tuple[list[str], list[bytes | str | int | float],
                                asyncio.Future[Any]]] = []
        self._sending: set[asyncio.Task[None]] = set()
        self._direct = 0  # plain calls in flight (at most one: a second one is queued)
        self._kept: AbstractConnection | None = None  # taken from the pool for lone calls

    async def run(self, keys: list[str], args: list[bytes | str | int | float]) -> Any:
        """The script's reply to ``keys`` and ``args`` (or its error)."""
        if not (self._queue or self._sending or self._direct):
            self._direct += 1
            try:
                return await self._lone_call(keys, args)
            finally:
                self._direct -= 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append((keys, args, future))
        if len(self._queue) == 1:
            loop.call_soon(self._flush)
        return await future

    async def _lone_call(self, keys: list[str], args: list[bytes | str | int | float]) -> Any:
        """EVALSHA on the kept connection (one call at a time uses it, see :meth:`run`).

        redis-py's connection still does the work that matters: it connects
        when it is not, checks its health after an idle spell, times out,
        and disconnects on any error, a cancelled read included, so that no
        reply is left unread.  A connection error (Redis restarted) or a
        script Redis lost (NOSCRIPT) goes once through the script's regular
        call, which reconnects and reloads as every other command does.
        """
        if self._kept is None:
            client: Any = self._script.registered_client  # a single Redis (see the class)
            self._kept = await client.connection_pool.get_connection()
        conn = self._kept
        try:
            await conn.send_packed_command(
                conn.pack_command("EVALSHA", self._script.sha, len(keys), *keys, *args))
            return await conn.read_response()
        except (RedisConnectionError, NoScriptError):
            return await self._script(keys=keys, args=args)

    def _flush(self) -> None:
        batch, self._queue = self._queue, []
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[list[str], list[bytes | str | int | float],
                                            asyncio.Future[Any]]]) -> None:
        try:
            replies = await self._replies([(keys, args) for keys, args, _ in batch])
        except (RedisError, OSError) as exc:  # the store is unreachable: every caller's error
            replies = [exc] * len(batch)
        except BaseException:  # a bug, or shutdown: no caller may wait forever
            for _, _, future in batch:
                future.cancel()
            raise
        for (_, _, future), reply in zip(batch, replies, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _replies(self, calls: list[tuple[list[str], list[bytes | str | int | float]]]
                       ) -> list[Any]:
        """One reply (or error) per call: a plain EVALSHA for one call, else a pipeline."""
        if len(calls) == 1:
            keys, args = calls[0]
            return [await self._script(keys=keys, args=args)]
        client: Any = self._script.registered_client
        async with client.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                pipe.evalsha(self._script.sha, len(keys), *keys, *args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        for i, reply in enumerate(replies):
            if isinstance(reply, NoScriptError):  # runs again, loading the script
                try:
                    replies[i] = await self._script(keys=calls[i][0], args=calls[i][1])
                except ResponseError as exc:  # the script's own error: this caller's only
                    replies[i] = exc
        return replies


#: A line ``--! include NAME`` of a script stands for the text of ``lua/NAME.lua``: local
#: functions that several scripts share (Redis runs each script as one self-contained chunk).
_INCLUDE = re.compile(r"^--! include (\w+)$", re.MULTILINE)


def lua_source(name: str) -> str:
    """Source text of ``lua/<name>.lua``, with its includes in place."""
    source = resources.files("app.store").joinpath("lua", f"{name}.lua").read_text("utf-8")
    return _INCLUDE.sub(lambda found: lua_source(found.group(1)), source)


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
        return await run_script(self._scripts[name], keys, args, client)
