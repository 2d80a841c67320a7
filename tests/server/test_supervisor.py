"""The embedded Redis's supervisor: restarts after an exit, backs off while starts fail, and
says what is wrong meanwhile."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from app.metrics import Metrics
from app.server.supervisor import StoreSupervisor
from app.store.embedded import EmbeddedRedis


def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.slow
def test_restarts_after_failed_starts_and_keeps_the_data(tmp_path: Path) -> None:
    metrics = Metrics()
    supervisor = StoreSupervisor(metrics, first_delay=0.05, max_delay=0.2)
    server = EmbeddedRedis(tmp_path).start()
    try:
        with supervisor.watching(server):
            assert supervisor.health() is None
            with redis.Redis.from_url(server.url) as client:
                client.set("k", b"v")
            server.options = ["--no-such-option", "1"]  # every start fails until undone
            assert server.process is not None
            server.process.send_signal(signal.SIGKILL)
            _until(lambda: (metrics.registry.get_sample_value("noisyloop_store_restarts_total")
                            or 0) >= 3, "three failed starts")
            problem = supervisor.health()
            assert problem is not None and "does not start" in problem
            server.options = []
            _until(lambda: supervisor.health() is None, "the restart")
            with redis.Redis.from_url(server.url) as client:
                assert client.get("k") == b"v"
    finally:
        server.stop()
