"""Retries: 503 and connection errors are retried with backoff, 4xx never (scripted server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from noisyloop_client import AsyncClient, Client, ConnectionFailed, NoisyloopError, RetryPolicy

from app.store.embedded import free_port

FAST = RetryPolicy(retries=3, base=0.01, max_delay=0.05)


class Scripted:
    """Answers with the next (status, body) of ``script`` (the last one repeats)."""

    def __init__(self, script: list[tuple[int, dict[str, object]]]) -> None:
        self.script = script
        self.requests = 0
        self.lock = threading.Lock()

    def next(self) -> tuple[int, dict[str, object]]:
        with self.lock:
            i = min(self.requests, len(self.script) - 1)
            self.requests += 1
            return self.script[i]


def _error(code: str, field: str | None = None) -> dict[str, object]:
    return {"error": {"code": code, "message": f"{code} happened", "field": field}}


@pytest.fixture
def scripted() -> Iterator[tuple[str, Scripted]]:
    state = Scripted([])

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, body = state.next()
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 503:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_retry_503_twice_then_success(scripted: tuple[str, Scripted]) -> None:
    url, state = scripted
    state.script = [(503, _error("store_unavailable"))] * 2 + [(200, {"status": "ok"})]
    with Client(url, "k", retry=FAST) as c:
        assert c.health() == {"status": "ok"}
    assert state.requests == 3


def test_retry_503_gives_up_with_typed_error(scripted: tuple[str, Scripted]) -> None:
    url, state = scripted
    state.script = [(503, _error("store_unavailable"))]
    with Client(url, "k", retry=FAST) as c, pytest.raises(NoisyloopError) as info:
        c.get_model("m")
    assert state.requests == FAST.retries + 1
    assert (info.value.status, info.value.code, info.value.retry_after) == (
        503, "store_unavailable", 0.0)


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422])
def test_no_retry_on_4xx(scripted: tuple[str, Scripted], status: int) -> None:
    url, state = scripted
    state.script = [(status, _error("bad_thing", "features[2]")), (200, {})]
    with Client(url, "k", retry=FAST) as c, pytest.raises(NoisyloopError) as info:
        c.predict("m", [1.0, 2.0])
    assert state.requests == 1
    err = info.value
    assert (err.status, err.code, err.field) == (status, "bad_thing", "features[2]")
    assert err.message == "bad_thing happened"


async def test_async_retry_503_then_success(scripted: tuple[str, Scripted]) -> None:
    url, state = scripted
    state.script = [(503, _error("store_unavailable")), (202, {"accepted": True})]
    async with AsyncClient(url, "k", retry=FAST) as c:
        assert await c.feedback("m", "e1", click=True) == {"accepted": True}
    assert state.requests == 2


def test_connection_refused_is_retried_then_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with Client(url, "k", retry=FAST) as c, pytest.raises(ConnectionFailed) as info:
        c.health()
    assert info.value.code == "connection_error" and info.value.status is None


def test_backoff_grows_and_honours_retry_after() -> None:
    policy = RetryPolicy(retries=5, base=0.1, max_delay=1.0)
    for attempt in range(5):
        wait = policy.delay(attempt)
        assert 0.5 * min(1.0, 0.1 * 2 ** attempt) <= wait <= min(1.0, 0.1 * 2 ** attempt)
    assert policy.delay(0, retry_after=0.8) == 0.8
    assert policy.delay(0, retry_after=30) == 1.0
