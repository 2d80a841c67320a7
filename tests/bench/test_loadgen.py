"""The service benchmark's load generator against a small real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from app.bench.loadgen import closed_loop, encode_request, open_loop


@dataclass
class Server:
    """An HTTP/1.1 server answering every request after ``delay`` s with ``status``.

    With ``close_after``, it closes the connection after that many answers on it; with
    ``fast_first``, its first that many answers come at once.
    """

    delay: float = 0.0
    fast_first: int = 0
    status: int = 200
    close_after: int | None = None
    url: str = ""
    requests: list[bytes] = field(default_factory=list)
    collector_on: list[bool] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                self.collector_on.append(gc.isenabled())  # the generator's: one process
                await asyncio.sleep(self.delay if len(self.requests) > self.fast_first else 0)
                writer.write(b"HTTP/1.1 %d X\r\nContent-Length: 2\r\n\r\n{}" % self.status)
                answered += 1
                if self.close_after is not None and answered >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    tcp = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.url = f"http://127.0.0.1:{tcp.sockets[0].getsockname()[1]}"
    async with tcp:
        yield srv


def test_encode_request_is_a_complete_http_request() -> None:
    raw = encode_request("http://127.0.0.1:8000", "/v1/x", b'{"a":1}', "tok")
    head, body = raw.split(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/x HTTP/1.1"
    assert b"Host: 127.0.0.1:8000" in lines
    assert b"Authorization: Bearer tok" in lines
    assert b"Content-Length: 7" in lines
    assert body == b'{"a":1}'
    assert encode_request("http://h:1", "/get", None).startswith(b"GET /get HTTP/1.1\r\n")


async def test_closed_loop_counts_answers_and_sends_the_given_requests(server: Server) -> None:
    requests = [encode_request(server.url, f"/r{i}", b"{}") for i in range(3)]
    result = await closed_loop(server.url, requests, concurrency=4, seconds=0.3)
    assert result["errors"] == 0
    assert result["requests"] == len(server.requests) > 10
    assert {r.split(b" ")[1] for r in server.requests} == {b"/r0", b"/r1", b"/r2"}
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]


async def test_closed_loop_counts_non_2xx_answers_as_errors(server: Server) -> None:
    server.status = 503
    result = await closed_loop(server.url, [encode_request(server.url, "/", b"{}")], 2, 0.2)
    assert result["requests"] == 0
    assert result["errors"] == len(server.requests) > 0


async def test_open_loop_sends_on_schedule_and_measures_from_the_due_time(server: Server
                                                                          ) -> None:
    server.delay = 0.02
    result = await open_loop(server.url, [encode_request(server.url, "/", b"{}")],
                             rate=200.0, seconds=0.5, connections=16)
    assert result["requests"] == len(server.requests) == 100
    assert result["errors"] == 0
    assert result["p50_ms"] >= 20.0
    assert result["achieved_per_second"] > 150


@pytest.mark.slow
async def test_open_loop_latency_includes_waiting_for_a_free_connection(server: Server
                                                                        ) -> None:
    """One connection, answers in 20 ms, due every 5 ms: the queue must show in the latency
    (coordinated omission would report about 20 ms)."""
    server.delay = 0.02
    result = await open_loop(server.url, [encode_request(server.url, "/", b"{}")],
                             rate=200.0, seconds=0.25, connections=1)
    assert result["requests"] == 50
    # the last request waits for the 49 before it: about 50 * 20 ms - 250 ms
    assert result["max_ms"] > 500.0


@pytest.mark.slow
async def test_open_loop_tells_in_which_seconds_the_slow_requests_were_due(server: Server
                                                                          ) -> None:
    """100 requests due in the first second answered at once, 100 in the second after 30 ms."""
    server.delay, server.fast_first = 0.03, 100
    result = await open_loop(server.url, [encode_request(server.url, "/", b"{}")],
                             rate=100.0, seconds=2.0, connections=16)
    slow = result["over_10ms_by_second"]
    assert result["requests"] == 200 and slow["1"] == 100
    assert sum(slow.values()) < 200  # the first second's answers came at once


async def test_open_loop_replaces_connections_the_server_closes(server: Server) -> None:
    server.close_after = 1
    result = await open_loop(server.url, [encode_request(server.url, "/", b"{}")],
                             rate=100.0, seconds=0.3, connections=2)
    assert result["requests"] + result["errors"] == 30
    assert result["requests"] >= 2


async def test_a_malformed_response_is_an_error_not_a_crash(server: Server) -> None:
    server.status = 99999  # "HTTP/1.1 99999 X": httptools refuses the status line
    result = await closed_loop(server.url, [encode_request(server.url, "/", b"{}")], 2, 0.2)
    assert result["requests"] == 0
    assert result["errors"] == 2  # one per connection, which is then closed


@pytest.mark.parametrize("loop", ["closed", "open"])
async def test_timed_loops_run_without_the_cyclic_collector_and_restore_it(
        server: Server, loop: str) -> None:
    """The generator's own collections would count as server latency."""
    requests = [encode_request(server.url, "/", b"{}")]
    assert gc.isenabled()
    if loop == "closed":
        await closed_loop(server.url, requests, concurrency=2, seconds=0.1)
    else:
        await open_loop(server.url, requests, rate=200.0, seconds=0.1, connections=2)
    assert server.collector_on and not any(server.collector_on)
    assert gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    try:
        await closed_loop(server.url, requests, concurrency=1, seconds=0.05)
        assert not gc.isenabled()
    finally:
        gc.enable()
