"""Running the jobs of a queue (NREst runs, policy evaluations) until it is empty."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.store.jobs import JobQueue, QueuedJob
from workers.context import WorkerContext


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
