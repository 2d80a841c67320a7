"""``noisyloop serve`` as a process of its own, for the tests that need the real command (its
embedded Redis, its workers in the same process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.store.embedded import free_port


@contextmanager
def serve_process(data_dir: Path, env: Mapping[str, str],
                  ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``noisyloop serve`` on a free port with ``data_dir``, ``env`` added to the environment
    (the Redis URLs removed: it starts its embedded Redis), in a process group of its own;
    yields its base URL and process once ready, then stops it with SIGTERM (and SIGKILL of
    its whole group if it has not ended within 30 s)."""
    port = free_port()
    full = {**os.environ, **env}
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL"):
        full.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--data-dir",
         str(data_dir)],
        env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not ready(base):
            assert proc.poll() is None, "noisyloop serve exited early"
            assert time.monotonic() < deadline, "noisyloop serve did not become ready"
            time.sleep(0.2)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def ready(base: str) -> bool:
    """Whether the service at ``base`` answers ``/readyz`` with 200."""
    try:
        return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
