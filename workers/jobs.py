"""The jobs role: the queued jobs of every job kind, then the periodic work (after arq).

A job kind (:class:`JobKind`) is the queue its jobs wait on in the store
(:class:`app.store.jobs.JobQueue`) and the handler that runs one taken job and
records its outcome in it; :data:`JOB_KINDS` maps each kind's name to it (arq's
``functions``, Celery's task registry).  One pass (:func:`run_pass`) empties
the queue of each kind in turn, then runs each handler of :data:`PERIODIC`
(work the role finds for itself, arq's ``cron_jobs``).  Adding a kind is its
handler in its module, its queue in the store and one line here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from operator import attrgetter

from app.store import Store
from app.store.jobs import JobQueue, QueuedJob
from workers import evaluations, nrest
from workers.context import WorkerContext


@dataclass(frozen=True)
class JobKind:
    """One kind of job the jobs role runs."""

    queue: Callable[[Store], JobQueue]
    """The kind's queue in the store."""
    run: Callable[[WorkerContext, QueuedJob], Awaitable[None]]
    """Runs one taken job (marked running) and records its outcome (or why it failed) in
    it; never leaves it running."""


#: Job kind name -> kind, run in this order: the requested noise estimates
#: (``POST .../noise/estimate``), then the policy evaluations (``POST .../evaluations``).
JOB_KINDS: dict[str, JobKind] = {
    "noise_estimate": JobKind(attrgetter("noise.jobs"), nrest.run_job),
    "evaluation": JobKind(attrgetter("evaluations.jobs"), evaluations.run_job),
}
#: What the role does after the queues, each returning the runs it did: the periodic noise
#: estimates of the models that are due.
PERIODIC: tuple[Callable[[WorkerContext], Awaitable[int]], ...] = (nrest.run_periodic,)


async def run_pass(ctx: WorkerContext) -> int:
    """Every queued job of each kind of :data:`JOB_KINDS`, then each handler of
    :data:`PERIODIC`; returns the runs done."""
    runs = 0
    for kind in JOB_KINDS.values():
        runs += await run_queued(ctx, kind.queue(ctx.store), kind.run)
    for periodic in PERIODIC:
        runs += await periodic(ctx)
    return runs


async def run_queued(ctx: WorkerContext, queue: JobQueue,
                     run_job: Callable[[WorkerContext, QueuedJob], Awaitable[None]]) -> int:
    """Take each queued job (marked running as it is taken, with the NREst timeout as its
    deadline) and ``run_job`` it, until the queue is empty or the worker stops; returns how
    many ran."""
    runs = 0
    while not ctx.stopping.is_set() and (
            job := await queue.take(ctx.config.worker_id, ctx.config.nrest_timeout)) is not None:
        await run_job(ctx, job)
        runs += 1
    return runs
