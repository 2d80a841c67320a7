"""Sweeper role: ends the decisions whose wait time ran out.

A pass looks only at the models due now on the sweeper's due set
(:mod:`app.store.dueset`: each model scored by its earliest deadline), so
idle models cost it nothing.  Per model, the ids whose deadline (Redis clock)
has passed are read from the model's pending set and each is ended by the
``expire_decision`` Lua step: with ``on_timeout: "no_click"`` the logged
context joined with a click of 0 goes to the event stream (the trainer
applies it like any feedback), with ``"drop"`` nothing does; either way
``events_expired`` counts it and the context is gone, so a late feedback gets
404.  The feedback join and the expiry both remove the pending entry
atomically, so each decision ends exactly once, whichever comes first;
several sweepers may run at once.  The model is then due again at its
earliest remaining deadline.

Every :data:`SEED_SECONDS` every model is put on the due set once more (a
process that logged a decision may have died before scheduling it), and every
:data:`~app.store.jobs.REQUEUE_AFTER_SECONDS` the jobs (NREst runs,
evaluations) whose creator stored them but died before queueing them are
queued again (:meth:`app.store.jobs.JobQueue.requeue_stale`).  The tests'
drain does both on every pass.
"""

from __future__ import annotations

import functools
import logging
import time

from app.store.dueset import earliest_deadline
from app.store.jobs import REQUEUE_AFTER_SECONDS
from app.store.keys import ModelKeys
from workers.context import WorkerContext
from workers.jobs import JOB_KINDS

logger = logging.getLogger(__name__)

#: Seconds between two passes that put every model on the due set.
SEED_SECONDS = 300.0
#: Models one pass takes from the due set.
DUE_PER_PASS = 1000


async def run_pass(ctx: WorkerContext) -> int:
    """Expire the overdue decisions of every model due now (up to ``sweep_limit`` per
    model); returns the decisions ended."""
    await _upkeep(ctx)
    now = await ctx.store.events.server_time()
    total = 0
    for ref in await ctx.store.sweep.due(now, DUE_PER_PASS):
        if ctx.stopping.is_set():
            break
        mk = ModelKeys(*ref)
        due = await ctx.store.events.due_decisions(mk, now, ctx.config.sweep_limit)
        if due:
            config = await ctx.store.models.config(*ref)
            if config is None:
                await ctx.store.sweep.forget(mk)
                continue
            mode = config.feedback.on_timeout
            default = config.timeout_feedback if mode == "no_click" else None
            outcomes = await ctx.store.events.expire_many(mk, due, mode, default or {})
            expired = outcomes.count("expired")
            if expired:
                ctx.metrics.events_expired.labels(*ref).inc(expired)
                logger.debug("sweeper: %d decision(s) of %s/%s expired (%s)", expired, *ref,
                             mode)
            total += expired
        await ctx.store.sweep.reschedule(
            mk, functools.partial(earliest_deadline, ctx.store.redis, mk))
    return total


async def _upkeep(ctx: WorkerContext) -> None:
    """Every model on the due set again, and the jobs stored but never queued queued again,
    when their time came (module docstring)."""
    now = time.monotonic()
    seed = not ctx.paced or now - ctx.swept_all_at >= SEED_SECONDS
    requeue = not ctx.paced or now - ctx.requeued_at >= REQUEUE_AFTER_SECONDS
    if not (seed or requeue):
        return
    refs = await ctx.store.models.all_models()
    if seed:
        ctx.swept_all_at = now
        await ctx.store.sweep.seed(refs)
    if requeue:
        ctx.requeued_at = now
        await _requeue_stale_jobs(ctx, [ModelKeys(*ref) for ref in refs])


async def _requeue_stale_jobs(ctx: WorkerContext, models: list[ModelKeys]) -> None:
    """Queue again the jobs of ``models`` stored but never queued (module docstring), of
    every job kind (:data:`workers.jobs.JOB_KINDS`)."""
    for queue in [kind.queue(ctx.store) for kind in JOB_KINDS.values()]:
        pushed = await queue.requeue_stale(models)
        if pushed:
            logger.warning("sweeper: %d job(s) stored but not queued were queued again (%s)",
                           pushed, queue.queue)
