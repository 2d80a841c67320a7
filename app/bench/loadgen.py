"""A low-overhead HTTP/1.1 load generator for the single-request phases of ``bench service``.

Why not :mod:`noisyloop_client` here: httpx spends several hundred microseconds of
CPU per request in the load generator itself, so on a 2-core machine the
generator, not the server, set the pace of single-request phases (the bare
baseline looked 5x slower under httpx than under ``wrk``).  This generator
keeps one keep-alive connection per in-flight request, sends requests that
are encoded once before the timer starts, and reads responses with
httptools' C parser, so its own cost is a few tens of microseconds per
request.  The batch, feedback and WebSocket phases, where the server's work
per request dominates, still go through :mod:`noisyloop_client`.

The generator is a Python process too: its own pauses would count as the
server's latency.  Each timed loop therefore runs with the cyclic garbage
collector off (as :mod:`timeit` does; a loop of 10,000 requests allocates
a few MB of tasks, freed by reference counting), and the open loop keeps its
in-flight requests in a set instead of gathering every request at the end.
Before that, the generator's own generation-2 collections (23-69 ms on this
machine) and its final gather over all its tasks (up to 150 ms at the end of
a 30 s loop) showed as the p99 spikes of *both* noisyloop and the baseline
(``docs/benchmarks/service.md``).

Two schedules:

* :func:`closed_loop`: ``concurrency`` connections, each sending its next
  request when the previous answer arrives (throughput at that concurrency);
* :func:`open_loop`: requests due on a fixed schedule at ``rate`` per second,
  latency measured from the due time, not the send time, so a slow answer
  cannot hide the queue behind it (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import numpy as np

#: A request slower than this counts in an open loop's ``over_10ms_by_second``.
SLOW_SECONDS = 0.010


def encode_request(url: str, path: str, body: bytes | None, token: str | None = None) -> bytes:
    """The bytes of one keep-alive ``POST`` (or ``GET`` when ``body`` is None) to ``path``."""
    host = urlsplit(url).netloc
    lines = [f"{'GET' if body is None else 'POST'} {path} HTTP/1.1", f"Host: {host}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


class _Connection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[int] | None = None
        self._lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:  # counted as a failed request, not a crash
            self._lost = ConnectionError(f"malformed HTTP response: {exc}")
            self._fail(self._lost)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("connection closed by the server")
        self._fail(self._lost)

    def on_message_complete(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(self._parser.get_status_code())

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    async def request(self, raw: bytes) -> int:
        """Send ``raw`` and wait for the whole response; returns its status code."""
        if self.closed or self._transport is None:
            raise ConnectionResetError("connection is closed")
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(raw)
        return await self._waiter

    @property
    def closed(self) -> bool:
        """Whether the server (or the network) closed the connection."""
        return self._lost is not None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def _connect(url: str) -> _Connection:
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(_Connection, parts.hostname or "127.0.0.1",
                                            parts.port or 80)
    return conn


def latency_summary(latencies: Sequence[float]) -> dict[str, float | None]:
    """p50 / p95 / p99 / max of ``latencies`` (seconds) in milliseconds."""
    if not latencies:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    arr = np.asarray(latencies) * 1e3
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3),
            "p99_ms": round(float(p99), 3), "max_ms": round(float(arr.max()), 3)}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a timed loop (on again after, if it was on)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Tally:
    """Latencies of answered requests (and when each was due); non-2xx answers and failures
    are counted apart."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.due: list[float] = []
        self.errors = 0

    def slow_by_second(self, start: float, threshold: float = SLOW_SECONDS) -> dict[str, int]:
        """Requests slower than ``threshold`` s by the second of the phase they were due in
        (only the seconds that had any): one burst, or a tail spread over the phase."""
        slow = np.asarray(self.latencies) > threshold
        seconds = (np.asarray(self.due)[slow] - start).astype(int)
        return {str(sec): int(n) for sec, n in enumerate(np.bincount(seconds)) if n}

    async def send(self, conn: _Connection, raw: bytes, since: float) -> None:
        try:
            status = await conn.request(raw)
        except OSError:
            self.errors += 1
            return
        if 200 <= status < 300:
            self.latencies.append(time.perf_counter() - since)
            self.due.append(since)
        else:
            self.errors += 1


async def closed_loop(url: str, requests: Sequence[bytes], concurrency: int, seconds: float
                      ) -> dict[str, Any]:
    """``concurrency`` connections sending back to back for ``seconds``; requests/s, latency."""
    conns = [await _connect(url) for _ in range(concurrency)]
    tally = _Tally()

    async def worker(conn: _Connection, offset: int, end: float) -> None:
        i = offset
        while time.perf_counter() < end and not conn.closed:
            i += 1
            await tally.send(conn, requests[i % len(requests)], time.perf_counter())

    try:
        with _collector_paused():
            start = time.perf_counter()
            await asyncio.gather(*(worker(c, k, start + seconds) for k, c in enumerate(conns)))
    finally:
        for conn in conns:
            conn.close()
    elapsed = time.perf_counter() - start
    return {"concurrency": concurrency, "requests": len(tally.latencies),
            "errors": tally.errors, "per_second": round(len(tally.latencies) / elapsed, 1),
            **latency_summary(tally.latencies)}


async def open_loop(url: str, requests: Sequence[bytes], rate: float, seconds: float,
                    connections: int = 64) -> dict[str, Any]:
    """Requests due every ``1 / rate`` s for ``seconds``; latency counts from the due time.

    A request whose due time finds every connection busy waits for one, and
    that wait is part of its latency.  ``achieved_per_second`` below
    ``rate`` means the server could not keep up.  ``generator_late_*`` tell
    how late the generator itself issued requests (its process descheduled
    or busy): latency that is the generator's, not the server's.
    """
    idle: asyncio.Queue[_Connection] = asyncio.Queue()
    opened = [await _connect(url) for _ in range(connections)]
    for conn in opened:
        idle.put_nowait(conn)
    tally = _Tally()
    n = int(rate * seconds)

    async def one(i: int, due: float) -> None:
        conn = await idle.get()
        try:
            await tally.send(conn, requests[i % len(requests)], due)
        finally:
            if not conn.closed:
                idle.put_nowait(conn)
            else:  # replace a connection the server closed
                idle.put_nowait(await _connect(url))

    in_flight: set[asyncio.Task[None]] = set()
    late: list[float] = []
    try:
        with _collector_paused():
            start = time.perf_counter()
            for i in range(n):
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                late.append(time.perf_counter() - due)
                task = asyncio.create_task(one(i, due))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            await asyncio.gather(*in_flight)
    finally:
        while not idle.empty():
            idle.get_nowait().close()
        for conn in opened:
            conn.close()
    elapsed = time.perf_counter() - start
    return {"target_rate": rate, "requests": len(tally.latencies), "errors": tally.errors,
            "achieved_per_second": round(len(tally.latencies) / elapsed, 1),
            **latency_summary(tally.latencies),
            "over_10ms_by_second": tally.slow_by_second(start),
            **{f"generator_late_{k}": v for k, v in latency_summary(late).items()
               if k in ("p99_ms", "max_ms")}}
