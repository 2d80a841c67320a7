"""Sweeper role: ends the decisions whose wait time ran out.

Per model, the ids whose deadline (Redis clock) has passed are read from the
model's pending set and each is ended by the ``expire_decision`` Lua step:
with ``on_timeout: "no_click"`` the logged context joined with a click of 0
goes to the event stream (the trainer applies it like any feedback), with
``"drop"`` nothing does; either way ``events_expired`` counts it and the
context is gone, so a late feedback gets 404.  The feedback join and the
expiry both remove the pending entry atomically, so each decision ends
exactly once, whichever comes first; several sweepers may run at once.

Each pass also queues again the jobs (NREst runs, evaluations) whose creator
stored them but died before queueing them
(:meth:`app.store.jobs.JobQueue.requeue_stale`).
"""

from __future__ import annotations

import logging

from app.learners.build import timeout_feedback
from app.store.keys import ModelKeys
from workers.context import WorkerContext

logger = logging.getLogger(__name__)


async def run_pass(ctx: WorkerContext) -> int:
    """Expire every overdue decision of every model (up to ``sweep_limit`` per model)."""
    now = await ctx.store.events.server_time()
    total = 0
    refs = await ctx.store.models.all_models()
    await _requeue_stale_jobs(ctx, [ModelKeys(*ref) for ref in refs])
    for ref in refs:
        if ctx.stopping.is_set():
            break
        mk = ModelKeys(*ref)
        due = await ctx.store.events.due_decisions(mk, now, ctx.config.sweep_limit)
        if not due:
            continue
        config = await ctx.store.models.config(*ref)
        if config is None:
            continue
        mode = (config.get("feedback") or {}).get("on_timeout", "drop")
        default = timeout_feedback(config) if mode == "no_click" else None
        outcomes = await ctx.store.events.expire_many(mk, due, mode, default or {})
        expired = outcomes.count("expired")
        if expired:
            ctx.metrics.events_expired.labels(*ref).inc(expired)
            logger.debug("sweeper: %d decision(s) of %s/%s expired (%s)", expired, *ref, mode)
        total += expired
    return total


async def _requeue_stale_jobs(ctx: WorkerContext, models: list[ModelKeys]) -> None:
    """Queue again the jobs of ``models`` stored but never queued (module docstring)."""
    for queue in (ctx.store.noise.jobs, ctx.store.evaluations.jobs):
        pushed = await queue.requeue_stale(models)
        if pushed:
            logger.warning("sweeper: %d job(s) stored but not queued were queued again (%s)",
                           pushed, queue.queue)
