"""``noisyloop serve`` of this checkout in a subprocess, for benchmarks: a temporary data
directory, an admin token, a tenant and its API key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.store.embedded import free_port


@dataclass(frozen=True)
class Served:
    """A running ``serve``: its process, base URL, data directory, admin token and the
    tenant's key."""

    proc: subprocess.Popen[bytes]
    url: str
    data: Path
    token: str
    key: str


@contextmanager
def served(tenant: str = "bench", tries: int = 200) -> Iterator[Served]:
    """Start ``serve`` (embedded Redis), create ``tenant`` once it answers, stop it with
    SIGTERM on leaving (AssertionError when it never answers)."""
    from noisyloop_client import Client

    port, token = free_port(), "bench-token-" + os.urandom(12).hex()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": token, "OPENBLAS_NUM_THREADS": "1",
               "NOISYLOOP_LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                                 "--data-dir", data], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            key = None
            for _ in range(tries):
                try:
                    with Client(url, admin_token=token) as admin:
                        key = admin.create_tenant(tenant)["api_key"]
                    break
                except Exception:
                    time.sleep(0.3)
            assert key is not None, "serve did not start"
            yield Served(proc, url, Path(data), token, key)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
