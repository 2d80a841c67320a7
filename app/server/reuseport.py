"""Several uvicorn worker processes, each accepting on a listening socket of its own.

Why not uvicorn's ``workers=N``: its parent binds one socket and every worker
accepts from it.  The worker that wakes first takes every connection that is
waiting (libuv accepts until the queue is empty), so keep-alive connections
opened together land on one worker: 32 opened back to back split 32/0,
29/3, 27/5 and 23/9 in four tries on the 2-core test machine, and a worker
with 29 connections saturates its core while the other idles.  Here each
worker binds its own socket with ``SO_REUSEPORT`` and Linux spreads the
connections over their accept queues by a hash of the address pair: 18/14,
18/14, 18/14, 19/13 (``docs/benchmarks/service.md``).  The same problem and
fix are discussed upstream (uvicorn pull request 2472, not merged).

The parent binds the address first, without listening: a port that is
taken fails at once, with a clear message, and the bound socket keeps the
port for the workers (a socket that does not listen gets no connections).
It restarts a worker that dies, as uvicorn's supervisor does, and stops
every worker on SIGINT or SIGTERM.  A supervisor killed without a chance to
stop them (SIGKILL, the OOM killer) takes them along: each worker asks the
kernel for SIGTERM when its parent dies, instead of serving on as an orphan.
A worker that fails before it serves (the app does not import or its start-up
fails: uvicorn's exit code 3) stops them all: it would fail the same way on every restart.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Any

logger = logging.getLogger(__name__)

#: uvicorn's exit code for a server whose start-up failed (``uvicorn.config.STARTUP_FAILURE``).
STARTUP_FAILURE = 3
#: How long a stopping worker may take to finish its requests before it is killed.
STOP_TIMEOUT_SECONDS = 30.0


def supported() -> bool:
    """Whether the kernel spreads connections over ``SO_REUSEPORT`` listeners (Linux does;
    BSD and macOS accept the option but send every connection to one socket)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` with ``SO_REUSEPORT`` (not listening yet)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                         socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve(factory: str, workers: int, host: str, port: int, **options: Any) -> int:
    """Serve the app that ``factory`` (``"module:function"``) builds from ``workers`` processes.

    ``options`` go to :class:`uvicorn.Config` in each worker.  Returns the
    exit status: 0 after SIGINT / SIGTERM, 1 when the address is taken or a
    worker failed to start.  Where the kernel would not spread connections
    (:func:`supported`), uvicorn's own workers serve instead.
    """
    if not supported():
        import uvicorn

        uvicorn.run(factory, factory=True, workers=workers, host=host, port=port, **options)
        return 0
    try:
        reserved = bind(host, port)
    except OSError as exc:
        logger.error("cannot bind %s:%s: %s", host, port, exc)
        return 1
    port = reserved.getsockname()[1]
    stop = {"signal": 0}

    def request_stop(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    context = multiprocessing.get_context("spawn")

    def start() -> BaseProcess:
        process = context.Process(target=_worker,
                                  args=(factory, host, port, options, os.getpid()),
                                  name="noisyloop-api-worker")
        process.start()
        return process

    status = 0
    procs: list[BaseProcess] = []
    try:
        procs += [start() for _ in range(workers)]
        logger.info("serving %s on %s:%d from %d workers (SO_REUSEPORT)", factory, host,
                    port, workers)
        while not stop["signal"]:
            wait([p.sentinel for p in procs], timeout=0.5)
            for i, process in enumerate(procs):
                if process.exitcode is None or stop["signal"]:
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    logger.error("worker %s failed to start; stopping", process.pid)
                    stop["signal"], status = signal.SIGTERM, 1
                    break
                logger.warning("worker %s exited with %s; starting another", process.pid,
                               process.exitcode)
                procs[i] = start()
    finally:
        _stop_all(procs)
        reserved.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def _stop_all(procs: list[BaseProcess]) -> None:
    """SIGTERM every worker (uvicorn finishes the requests in flight), SIGKILL the late ones."""
    for process in procs:
        if process.exitcode is None:
            process.terminate()
    for process in procs:
        process.join(STOP_TIMEOUT_SECONDS)
        if process.exitcode is None:
            process.kill()
            process.join()


def _worker(factory: str, host: str, port: int, options: dict[str, Any],
            supervisor: int) -> None:
    """One worker process: its own listening socket, one uvicorn server; it ends with the
    ``supervisor`` process."""
    import uvicorn

    from app.processes import die_with_parent

    die_with_parent()
    if os.getppid() != supervisor:  # the supervisor died before the line above
        return

    server = uvicorn.Server(uvicorn.Config(factory, factory=True, host=host, port=port,
                                           **options))
    try:
        server.run(sockets=[bind(host, port)])
    except Exception:
        if server.started:
            raise
        # an import, factory or bind error: every restart would fail the same way
        logger.exception("worker failed to start")
        sys.exit(STARTUP_FAILURE)
    if not server.started:
        sys.exit(STARTUP_FAILURE)
