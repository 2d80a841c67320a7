"""The worker: runs the background roles (trainer, NREst, sweeper) against one store.

Configured by keyword arguments, each role a module of plain ``async``
handlers of a shared :class:`~workers.context.WorkerContext` (after arq).
Each role loops ``handler -> sleep while idle`` until the stop event is
set; a pass that fails on an unreachable store is retried after
``retry_delay``, any other failure is logged and retried the same way.
Beside the roles, a keep-alive task refreshes the worker's heartbeat key and
renews its trainer leases (also during a long batch).

Shutdown (``stop`` set, e.g. on SIGTERM): each role finishes the model at
hand, shielded publish-then-acknowledge steps complete, leases are given
back so that other trainers take over at once, the heartbeat is removed.
Entries read but not yet published stay pending and are claimed by the
next owner: nothing is lost.

``drain()`` is the tests' mode: run every role's passes with no polling
delay until a whole round does nothing, then stop.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from app.metrics import Metrics
from app.store import STORE_ERRORS, Store
from app.store.embedded import _die_with_parent
from app.store.leases import check_worker_id
from app.store.util import utc_now
from workers import nrest, sweeper, trainer
from workers.context import WorkerConfig, WorkerContext

logger = logging.getLogger(__name__)

Handler = Callable[[WorkerContext], Awaitable[int]]

#: Role name -> one pass of the role (returns the work it did).
ROLES: dict[str, Handler] = {
    "trainer": trainer.run_pass,
    "nrest": nrest.run_pass,
    "sweeper": sweeper.run_pass,
}
#: Accepted role names that mean another role: every task's models, the
#: in-order ones (regression, noisy_label with UMA, noisy_input) included,
#: are trained by the trainer.
ALIASES = {"uma": "trainer"}
DEFAULT_ROLES = ("trainer", "nrest", "sweeper")


def resolve_roles(names: Sequence[str]) -> tuple[str, ...]:
    """Canonical role names (aliases resolved, duplicates dropped); ValueError if unknown."""
    out: list[str] = []
    for name in names:
        role = ALIASES.get(name.strip(), name.strip())
        if role not in ROLES:
            raise ValueError(f"unknown role {name!r}; choose from "
                             f"{sorted([*ROLES, *ALIASES])}")
        if role not in out:
            out.append(role)
    if not out:
        raise ValueError("no role given")
    return tuple(out)


def default_worker_id() -> str:
    """The host name: stable across restarts, so a restarted worker resumes its own entries."""
    return socket.gethostname().split(".")[0] or "worker"


class Worker:
    """Background roles of one process (see the module docstring).

    Parameters
    ----------
    store:
        The store (its Redis connection is shared, not closed here).
    roles:
        Roles to run (``trainer``, ``nrest``, ``sweeper``; ``uma`` = ``trainer``).
    worker_id:
        Heartbeat name and consumer name in the trainer group (default: the
        host name).  Two workers on one host need distinct ids.
    batch_size:
        Stream entries read for one update; a full read doubles the model's next
        read, up to ``MAX_BATCH_GROWTH`` times this (:mod:`workers.trainer`).
    flush_interval:
        Trainer's sleep when no model had a full batch (the longest an event
        waits for a batch to fill).
    poll_interval:
        Sleep of the NREst and sweeper roles when idle.
    lease_ttl:
        Seconds a trainer lease lives without renewal (a dead worker's models
        are taken over after this).
    heartbeat_ttl:
        Seconds the heartbeat key lives without refresh.
    max_deliveries:
        Deliveries after which an entry that was never applied goes to the
        dead-letter stream.
    handler_timeout:
        Longest one batch update may take.
    nrest_interval:
        Periodic NREst run after this many seconds if there are new samples
        (besides every ``n_s`` new samples).
    nrest_buffer:
        Sample buffer size of the models without ``n_s``.
    nrest_processes:
        Fit NREst in a child process (default); False: in a thread.
    metrics:
        Metrics container (``serve`` passes the API's; default a fresh one).
    metrics_port:
        Serve the metrics over HTTP on this port (None: do not).
    """

    def __init__(self, store: Store, *, roles: Sequence[str] = DEFAULT_ROLES,
                 worker_id: str | None = None, batch_size: int = 1000,
                 flush_interval: float = 0.05, poll_interval: float = 0.5,
                 lease_ttl: float = 10.0, heartbeat_ttl: float = 15.0,
                 max_deliveries: int = 10, handler_timeout: float = 120.0,
                 retry_delay: float = 1.0, nrest_interval: float = 600.0,
                 nrest_buffer: int = 5000, nrest_processes: bool = True,
                 metrics: Metrics | None = None, metrics_port: int | None = None) -> None:
        if batch_size < 1 or max_deliveries < 1 or nrest_buffer < 1:
            raise ValueError("batch_size, max_deliveries and nrest_buffer must be >= 1")
        if min(flush_interval, poll_interval, lease_ttl, heartbeat_ttl, handler_timeout,
               retry_delay, nrest_interval) <= 0:
            raise ValueError("intervals, time-outs and time-to-lives must be > 0")
        self.config = WorkerConfig(
            worker_id=check_worker_id(worker_id or default_worker_id()),
            roles=resolve_roles(roles), batch_size=batch_size, flush_interval=flush_interval,
            poll_interval=poll_interval, lease_ttl=lease_ttl, heartbeat_ttl=heartbeat_ttl,
            max_deliveries=max_deliveries, handler_timeout=handler_timeout,
            retry_delay=retry_delay, nrest_interval=nrest_interval, nrest_buffer=nrest_buffer)
        self.store = store
        self.metrics = metrics or Metrics()
        self.metrics_port = metrics_port
        self.nrest_processes = nrest_processes
        self.ctx: WorkerContext | None = None
        self._http: Any = None

    def _executor(self) -> Executor:
        if self.nrest_processes and "nrest" in self.config.roles:
            # spawn: a fork of a process with threads and an event loop is unsafe
            # (and the child dies with this process, even on SIGKILL)
            return ProcessPoolExecutor(max_workers=1,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_die_with_parent)
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="nrest")

    async def start(self, stop: asyncio.Event | None = None) -> WorkerContext:
        """Open the context, start the metrics endpoint, send the first heartbeat."""
        self.ctx = WorkerContext(self.config, self.store, self.metrics, self._executor(),
                                 stop or asyncio.Event())
        if self.metrics_port is not None:
            from prometheus_client import start_http_server

            self._http = start_http_server(self.metrics_port, registry=self.metrics.registry)
            logger.info("worker %s: metrics on port %d", self.config.worker_id,
                        self.bound_metrics_port or self.metrics_port)
        await self._beat()
        logger.info("worker %s: roles %s", self.config.worker_id, ",".join(self.config.roles))
        return self.ctx

    @property
    def bound_metrics_port(self) -> int | None:
        """The port the metrics endpoint listens on (useful with ``metrics_port=0``)."""
        if self._http is None:
            return None
        server = self._http[0] if isinstance(self._http, tuple) else self._http
        return int(server.server_port)

    async def run(self, stop: asyncio.Event) -> None:
        """Run every role until ``stop`` is set, then shut down cleanly."""
        ctx = await self.start(stop)
        try:
            await asyncio.gather(*(self._loop(ctx, role) for role in self.config.roles),
                                 self._keep_alive(ctx))
        finally:
            await self.close()

    async def drain(self) -> int:
        """Run every role's passes without delay until a round does nothing; returns the work."""
        ctx = self.ctx or await self.start()
        total = 0
        try:
            while True:
                done = 0
                for role in self.config.roles:
                    done += await ROLES[role](ctx)
                total += done
                if done == 0:
                    return total
        finally:
            await self.close()

    async def close(self) -> None:
        """Finish shielded steps, give the leases back, remove the heartbeat."""
        ctx, self.ctx = self.ctx, None
        if ctx is None:
            return
        ctx.stopping.set()
        if ctx.inflight:
            await asyncio.gather(*ctx.inflight, return_exceptions=True)
        try:
            await trainer.release_leases(ctx)
            await ctx.heartbeats.forget(self.config.worker_id)
        except STORE_ERRORS as exc:
            logger.warning("worker %s: could not release leases (%s); they expire in %.0f s",
                           self.config.worker_id, exc, self.config.lease_ttl)
        ctx.executor.shutdown(wait=False, cancel_futures=True)
        if self._http is not None:
            server = self._http[0] if isinstance(self._http, tuple) else self._http
            server.shutdown()
            self._http = None
        logger.info("worker %s: stopped", self.config.worker_id)

    async def _loop(self, ctx: WorkerContext, role: str) -> None:
        handler = ROLES[role]
        cfg = self.config
        interval = cfg.flush_interval if role == "trainer" else cfg.poll_interval
        busy = cfg.batch_size if role == "trainer" else 1
        while not ctx.stopping.is_set():
            try:
                done = await handler(ctx)
            except STORE_ERRORS as exc:
                logger.warning("worker %s: %s: store unavailable (%s); retrying", cfg.worker_id,
                               role, exc)
                await _sleep(ctx.stopping, cfg.retry_delay)
                continue
            except Exception:
                logger.exception("worker %s: %s pass failed; retrying", cfg.worker_id, role)
                await _sleep(ctx.stopping, cfg.retry_delay)
                continue
            if done < busy:
                await _sleep(ctx.stopping, interval)

    async def _keep_alive(self, ctx: WorkerContext) -> None:
        period = min(self.config.heartbeat_ttl, self.config.lease_ttl) / 3
        while not ctx.stopping.is_set():
            await _sleep(ctx.stopping, period)
            if ctx.stopping.is_set():
                return
            try:
                await self._beat()
                await trainer.renew_leases(ctx)
            except STORE_ERRORS as exc:
                logger.warning("worker %s: heartbeat failed (%s)", self.config.worker_id, exc)

    async def _beat(self) -> None:
        assert self.ctx is not None
        await self.ctx.heartbeats.beat(
            self.config.worker_id, self.config.heartbeat_ttl,
            {"roles": list(self.config.roles), "pid": os.getpid(), "host": socket.gethostname(),
             "at": utc_now()},
            trainer="trainer" in self.config.roles)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds`` or until ``stop`` is set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
