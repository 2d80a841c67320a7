"""One write per response (:mod:`app.server.onewrite`): real uvicorn, real sockets.

The segment counts come from the kernel (``TCP_INFO``'s ``tcpi_data_segs_in``
on the client's socket), so they show what went over the wire.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from app.server.onewrite import FLUSH_BYTES, PROTOCOL, CoalescingTransport
from app.store.embedded import free_port
from tests.conftest import served

BIG = bytes(range(256)) * (4 * FLUSH_BYTES // 256)  # several flushes' worth
release = threading.Event()  # lets /wait finish its body


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/small: a short JSON answer; /big: ``BIG``; /wait: headers and a first chunk, then the
    rest once ``release`` is set; /close: a short answer that closes the connection."""
    path = scope["path"]
    headers = [(b"content-type", b"application/json")]
    if path == "/wait":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        deadline = time.monotonic() + 10
        while not release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"rest"})
        return
    body = BIG if path == "/big" else b'{"label": 3}'
    if path == "/close":
        headers.append((b"connection", b"close"))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _serve(protocol: str) -> Iterator[int]:
    port = free_port()
    with served(uvicorn.Config(_app, host="127.0.0.1", port=port, http=protocol, loop="uvloop",
                               lifespan="off", log_config=None, access_log=False)):
        try:
            yield port
        finally:
            release.set()  # a /wait still running ends, so the server can stop
    release.clear()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    """A uvicorn server on the one-write protocol."""
    yield from _serve(PROTOCOL)


@pytest.fixture(scope="module")
def plain_port() -> Iterator[int]:
    """The same server on uvicorn's own httptools protocol (the control)."""
    yield from _serve("httptools")


def _data_segments_in(sock: socket.socket) -> int:
    """Segments with data the kernel received on ``sock`` (``tcpi_data_segs_in``, Linux 4.6+)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, 152)[0])


def _segments_per_response(port: int, responses: int) -> float:
    """Data segments per response, over ``responses`` keep-alive requests for /small."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/small")
        conn.getresponse().read()
        assert conn.sock is not None
        before = _data_segments_in(conn.sock)
        for _ in range(responses):
            conn.request("GET", "/small")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b'{"label": 3}'
        return (_data_segments_in(conn.sock) - before) / responses
    finally:
        conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_INFO layout is Linux's")
def test_each_response_arrives_in_one_segment(port: int, plain_port: int) -> None:
    assert _segments_per_response(port, 50) == 1.0
    # uvicorn alone writes the headers and the body apart (the kernel may now and then merge
    # the two when the first is still queued, hence "more than one" rather than two)
    assert _segments_per_response(plain_port, 50) > 1.5


def _get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_a_large_body_arrives_whole(port: int) -> None:
    status, headers, body = _get(port, "/big")
    assert status == 200 and int(headers["content-length"]) == len(BIG)
    assert body == BIG


def test_a_closing_response_is_written_before_the_close(port: int) -> None:
    status, headers, body = _get(port, "/close")
    assert (status, headers["connection"], body) == (200, "close", b'{"label": 3}')


def test_headers_of_a_waiting_stream_are_not_held_back(port: int) -> None:
    """The headers and first chunk leave at the end of their loop turn, not with the rest."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/wait")
        response = conn.getresponse()  # would time out if the headers waited for the body
        assert response.status == 200 and response.getheader("transfer-encoding") == "chunked"
        assert response.read1() == b"first"
        release.set()
        assert response.read() == b"rest"
    finally:
        conn.close()
        release.clear()


class _Recorder(asyncio.Transport):
    """The writes a :class:`CoalescingTransport` passes on (a transport with no socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


async def test_writes_of_one_turn_go_out_together_and_abort_drops_them() -> None:
    inner = _Recorder()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.writelines([b"HTTP/1.1 200 OK\r\n\r\n", bytearray(b"{}")])
    assert inner.writes == [] and transport.get_write_buffer_size() == 21
    await asyncio.sleep(0)  # the turn ends
    assert inner.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    transport.write(b"x" * FLUSH_BYTES)  # a full buffer's worth goes at once
    assert len(inner.writes) == 2
    transport.write(b"dropped")
    transport.abort()
    await asyncio.sleep(0)
    assert len(inner.writes) == 2 and inner.aborted and transport.get_write_buffer_size() == 0
