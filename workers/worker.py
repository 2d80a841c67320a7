"""The worker: runs the background roles (trainer, jobs, sweeper) against one store.

Configured by one :class:`~app.worker_settings.WorkerSettings`, each role a
module of plain ``async`` handlers of a shared
:class:`~workers.context.WorkerContext` (after arq).
Each role loops ``handler -> sleep while idle`` until the stop event is
set; a pass that fails on an unreachable store is retried after
``retry_delay``, any other failure is logged and retried the same way.
Beside the roles, a keep-alive task refreshes the worker's heartbeat key and
renews its trainer leases (also during a long batch), and a trainer listens
for the wake-ups of its sleeping models (:mod:`workers.wake`).

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
import contextlib
import logging
import multiprocessing
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from wsgiref.simple_server import WSGIServer

from app.learners import jit
from app.metrics import Metrics, start_metrics_server
from app.processes import pool_child
from app.settings import Settings
from app.store import STORE_ERRORS, Store
from app.store.util import utc_now
from app.worker_settings import Role, WorkerSettings
from workers import jobs, sweeper, trainer, wake
from workers.context import WorkerContext

logger = logging.getLogger(__name__)

Handler = Callable[[WorkerContext], Awaitable[int]]

#: Role -> one pass of the role (returns the work it did).
ROLES: dict[Role, Handler] = {
    "trainer": trainer.run_pass,
    "jobs": jobs.run_pass,
    "sweeper": sweeper.run_pass,
}


class Worker:
    """Background roles of one process (see the module docstring).

    Parameters
    ----------
    store:
        The store (its Redis connection is shared, not closed here).
    settings:
        What to run and how (default: ``Settings().worker``, i.e. the
        environment, else the defaults).
    metrics:
        Metrics container (``serve`` passes the API's; default a fresh one).
    metrics_port:
        Serve the metrics over HTTP on this port (None: do not).
    metrics_tokens:
        The Bearer tokens that may read them there (none: nobody).
    """

    def __init__(self, store: Store, settings: WorkerSettings | None = None, *,
                 metrics: Metrics | None = None, metrics_port: int | None = None,
                 metrics_tokens: Sequence[str] = ()) -> None:
        self.config = settings if settings is not None else Settings().worker
        self.store = store
        self.metrics = metrics or Metrics()
        self.metrics_port = metrics_port
        self.metrics_tokens = list(metrics_tokens)
        self.ctx: WorkerContext | None = None
        self._http: WSGIServer | None = None

    def _executor(self) -> Executor:
        if not self.config.nrest_threads and "jobs" in self.config.roles:
            # spawn: a fork of a process with threads and an event loop is unsafe
            # (and the child dies with this process, even on SIGKILL)
            return ProcessPoolExecutor(max_workers=1,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=pool_child)
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobs")

    async def start(self, stop: asyncio.Event | None = None) -> WorkerContext:
        """Open the context, start the metrics endpoint, send the first heartbeat, load the
        learners' compiled kernels (a trainer)."""
        self.ctx = WorkerContext(self.config, self.store, self.metrics, self._executor(),
                                 stop or asyncio.Event())
        if self.metrics_port is not None:
            self._http = start_metrics_server(self.metrics.registry, self.metrics_port,
                                              self.metrics_tokens)
            logger.info("worker %s: metrics on port %d", self.config.worker_id,
                        self.bound_metrics_port or self.metrics_port)
        await self._beat()
        if "trainer" in self.config.roles:  # numba's import and the cached kernels, now
            await asyncio.to_thread(jit.warm)  # rather than in the first batch
        logger.info("worker %s: roles %s", self.config.worker_id, ",".join(self.config.roles))
        return self.ctx

    @property
    def bound_metrics_port(self) -> int | None:
        """The port the metrics endpoint listens on (useful with ``metrics_port=0``)."""
        return None if self._http is None else int(self._http.server_port)

    async def run(self, stop: asyncio.Event) -> None:
        """Run every role until ``stop`` is set, then shut down cleanly."""
        ctx = await self.start(stop)
        try:
            listener = [wake.listen(ctx)] if "trainer" in self.config.roles else []
            await asyncio.gather(*(self._loop(ctx, role) for role in self.config.roles),
                                 self._keep_alive(ctx), *listener)
        finally:
            await self.close()

    async def drain(self) -> int:
        """Run every role's passes without delay until a round does nothing; returns the work."""
        ctx = self.ctx or await self.start()
        ctx.paced = False
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
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        logger.info("worker %s: stopped", self.config.worker_id)

    async def _loop(self, ctx: WorkerContext, role: Role) -> None:
        handler = ROLES[role]
        cfg = self.config
        interval = cfg.poll_interval  # the trainer sleeps as trainer.pause says
        busy = cfg.batch_size if role == "trainer" else 1
        while not ctx.stopping.is_set():
            if role == "trainer":
                ctx.woken.clear()  # a wake-up during the pass ends the sleep after it
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
            if done < busy and role == "trainer":
                await _sleep_or_wake(ctx, trainer.pause(ctx, done))
            elif done < busy:
                await _sleep(ctx.stopping, interval)

    async def _keep_alive(self, ctx: WorkerContext) -> None:
        period = min(self.config.heartbeat_ttl, self.config.lease_ttl) / 3
        while not ctx.stopping.is_set():
            await _sleep(ctx.stopping, period)
            if ctx.stopping.is_set():
                return
            try:
                await self._beat()
                # unless the trainer's pass renewed them lately (it does every lease_ttl / 3)
                if time.monotonic() - ctx.renewed_at >= self.config.lease_ttl / 4:
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


async def _sleep_or_wake(ctx: WorkerContext, seconds: float) -> None:
    """Sleep ``seconds``, or until the worker stops or a sleeping model is woken."""
    waits = [asyncio.ensure_future(ctx.stopping.wait()), asyncio.ensure_future(ctx.woken.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds`` or until ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
