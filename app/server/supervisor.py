"""Supervision of the embedded redis-server of ``noisyloop serve``: restart it when it exits.

A thread waits on the server's process.  When it exits while serve runs
(killed, out of memory, crashed), the supervisor logs it, counts a restart
(``noisyloop_store_restarts_total``) and starts it again on the same files
after a delay that doubles from :data:`FIRST_DELAY` to :data:`MAX_DELAY`
with each exit or failed start in a row (back to the first delay once the
server has run :data:`STABLE_SECONDS`).  Meanwhile :meth:`StoreSupervisor.health`
says what is wrong, which ``/healthz`` answers with a 503.  The clients of
the store reconnect by themselves once it answers again; what it had
accepted is in its AOF.  A server restarted here is a child of the
supervisor's thread, and Linux's parent-death signal follows the thread
(:func:`~app.processes.die_with_parent`): it gets SIGTERM when that thread
ends, which is when serve stops, just before the server is stopped anyway.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import threading
import time
from collections.abc import Iterator

from app.metrics import Metrics
from app.store.embedded import EmbeddedRedis

logger = logging.getLogger(__name__)

#: Seconds before the first restart of a server that exited.
FIRST_DELAY = 1.0
#: Longest delay between two restarts.
MAX_DELAY = 30.0
#: A server that ran this long before it exited is restarted after :data:`FIRST_DELAY` again.
STABLE_SECONDS = 60.0
#: How often the thread looks whether it was asked to stop, in seconds.
_POLL_SECONDS = 0.2


class StoreSupervisor:
    """Restarts an :class:`EmbeddedRedis` when its process exits (see the module's doc)."""

    def __init__(self, metrics: Metrics, first_delay: float = FIRST_DELAY,
                 max_delay: float = MAX_DELAY) -> None:
        self.metrics = metrics
        self.first_delay = first_delay
        self.max_delay = max_delay
        self._problem: str | None = None
        self._stop = threading.Event()

    def health(self) -> str | None:
        """None while the store runs (or is not supervised), else what is wrong with it."""
        return self._problem

    @contextlib.contextmanager
    def watching(self, server: EmbeddedRedis) -> Iterator[None]:
        """Supervise the started ``server`` until the block ends (before it is stopped)."""
        self._stop.clear()
        thread = threading.Thread(target=self._run, args=(server,), daemon=True,
                                  name="redis-supervisor")
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def _run(self, server: EmbeddedRedis) -> None:
        delay, started = self.first_delay, time.monotonic()
        while not self._stop.is_set():
            code = self._wait_exit(server)
            if code is None:
                return
            if time.monotonic() - started >= STABLE_SECONDS:
                delay = self.first_delay
            self._problem = f"the embedded redis-server exited with code {code}; restarting it"
            logger.error("embedded redis-server exited with code %s (see %s)", code,
                         server.data_dir / "redis.log")
            while True:
                logger.warning("restarting the embedded redis-server in %.0f s", delay)
                if self._stop.wait(delay):
                    return
                self.metrics.store_restarts.inc()
                delay = min(2 * delay, self.max_delay)
                try:
                    server.start(abort=self._stop)
                    break
                except (RuntimeError, OSError) as exc:
                    if self._stop.is_set():
                        return
                    self._problem = f"the embedded redis-server does not start: {exc}"
                    logger.error("embedded redis-server did not start: %s", exc)
            started = time.monotonic()
            self._problem = None
            logger.warning("embedded redis-server restarted (pid %s)",
                           server.process.pid if server.process else None)

    def _wait_exit(self, server: EmbeddedRedis) -> int | None:
        """The exit code of the server's process once it exits; None when asked to stop."""
        process = server.process
        while process is not None and not self._stop.is_set():
            try:
                return process.wait(_POLL_SECONDS)
            except subprocess.TimeoutExpired:
                continue
        return None
