"""The worker supervisor of ``noisyloop api --workers N`` as real processes
(:mod:`app.server.reuseport`): connections spread, dead workers replaced, clean stops."""

from __future__ import annotations

import collections
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.server import reuseport
from app.store.embedded import free_port
from tests import processes

pytestmark = [pytest.mark.slow,  # every test starts API processes
              pytest.mark.skipif(not reuseport.supported(), reason="needs Linux SO_REUSEPORT")]

ROOT = Path(__file__).resolve().parents[2]


def _start(factory: str, port: int, workers: int = 2, *,
           supported: bool = True) -> subprocess.Popen[bytes]:
    code = ("import sys; from app.server import reuseport; "
            + ("" if supported else "reuseport.supported = lambda: False; ")
            + f"sys.exit(reuseport.serve({factory!r}, {workers}, '127.0.0.1', {port}, "
            "log_config=None))")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _open(port: int) -> http.client.HTTPConnection:
    """A keep-alive connection, connected now (not at its first request)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.connect()
    return conn


def _pid(conn: http.client.HTTPConnection) -> int:
    """The id of the process that answers one GET on ``conn``."""
    conn.request("GET", "/")
    return int(conn.getresponse().read())


def _wait_serving(port: int, proc: subprocess.Popen[bytes], workers: int = 2) -> set[int]:
    """Wait until ``workers`` processes answer; their ids."""
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while len(seen) < workers:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, f"only {seen} answered"
        try:
            with contextlib.closing(_open(port)) as conn:
                seen.add(_pid(conn))
        except OSError:
            time.sleep(0.2)
    return seen


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """``proc`` (started in a session of its own), and on the way out every process of its
    group: a supervisor still running gets SIGTERM (it stops its workers), then whatever is
    left of the group SIGKILL."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(reuseport.STOP_TIMEOUT_SECONDS + 5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _assert_stops_on_sigterm(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


@pytest.fixture
def served() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    with _reaped(_start("tests.server.pid_app:create", port)) as proc:
        yield port, proc


def test_connections_opened_together_are_spread_over_the_workers(
        served: tuple[int, subprocess.Popen[bytes]]) -> None:
    """32 keep-alive connections opened back to back, as a load generator or a client pool
    opens them.  uvicorn's shared socket gave 32/0, 29/3, 27/5, 23/9 in four tries.  If the
    kernel's hash put each connection on a worker at random, a split of 4/28 or worse would
    come once in 2 * sum_{i<=4} C(32, i) / 2**32 = 1.9e-5 runs."""
    port, proc = served
    workers = _wait_serving(port, proc)
    conns = [_open(port) for _ in range(32)]
    try:
        first = [_pid(c) for c in conns]
        counts = collections.Counter(first)
        assert set(counts) == workers
        assert min(counts.values()) >= 5, counts
        assert [_pid(c) for c in conns] == first  # keep-alive: each stays with its worker
    finally:
        for c in conns:
            c.close()


def test_a_worker_that_dies_is_replaced(served: tuple[int, subprocess.Popen[bytes]]) -> None:
    port, proc = served
    first = _wait_serving(port, proc)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        now = _wait_serving(port, proc)
        if victim not in now:
            break
        assert time.monotonic() < deadline, "the killed worker was not replaced"
        time.sleep(0.2)
    assert len(now) == 2 and max(first) in now
    assert proc.poll() is None


def test_sigterm_stops_every_worker(served: tuple[int, subprocess.Popen[bytes]]) -> None:
    port, proc = served
    workers = _wait_serving(port, proc)
    _assert_stops_on_sigterm(proc)
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(OSError):
        _open(port).close()


def test_workers_end_with_a_supervisor_killed_by_sigkill(
        served: tuple[int, subprocess.Popen[bytes]]) -> None:
    """SIGKILL gives the supervisor no chance to stop its workers: the kernel ends them
    (parent-death signal), so none keeps serving the port as an orphan."""
    port, proc = served
    workers = _wait_serving(port, proc)
    proc.kill()
    proc.wait()
    assert processes.wait_gone(workers, timeout=30) == set()
    with pytest.raises(OSError):
        _open(port).close()


def test_without_reuseport_uvicorns_workers_serve() -> None:
    """Where the kernel would not spread connections (not Linux), uvicorn's workers."""
    port = free_port()
    with _reaped(_start("tests.server.pid_app:create", port, supported=False)) as proc:
        _wait_serving(port, proc, workers=1)  # which worker answers is up to the kernel
        _assert_stops_on_sigterm(proc)


def test_a_taken_port_fails_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert reuseport.serve("tests.server.pid_app:create", 2, "127.0.0.1", port) == 1


def test_an_app_that_cannot_start_stops_the_supervisor() -> None:
    """No restart loop: the failure would repeat on every restart."""
    with _reaped(_start("tests.server.pid_app:broken", free_port())) as proc:
        assert proc.wait(timeout=60) == 1
    assert proc.stderr is not None and b"this app cannot start" in proc.stderr.read()


def test_noisyloop_api_workers_serve_the_api_and_stop_cleanly(redis_url: str) -> None:
    """``noisyloop api --workers 2`` end to end: both workers answer an authenticated call."""
    import httpx

    port = free_port()
    env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": "reuseport-test-admin-token",
           "NOISYLOOP_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "api", "--workers", "2",
                             "--port", str(port), "--redis-url", redis_url], cwd=ROOT, env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    with _reaped(proc):
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as probe:
            while True:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "noisyloop api did not become ready"
                try:
                    if probe.get("/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
        auth = {"Authorization": "Bearer reuseport-test-admin-token"}
        statuses = []
        for _ in range(16):  # a new connection each time
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
                statuses.append(c.get("/v1/admin/tenants", headers=auth).status_code)
        assert statuses == [200] * 16
        _assert_stops_on_sigterm(proc)
