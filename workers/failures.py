"""A model whose trainer step raises: reported, retried later, never in the others' way.

Each pass runs one step per owned model; a step that raises (a corrupt
snapshot, a script error, a learner past its timeout) is caught there, so
the models after it in the pass still learn.  Its entries stay pending and
the model is retried later (:mod:`workers.pacing`).  The failure is
reported where each audience looks: a log line (the first failure, then
at every doubling of the count), ``noisyloop_trainer_step_failures_total``
and ``noisyloop_trainer_failing_models`` for the operator (no tenant or
model label: the log names it), and the model's stats for its owner
(:mod:`app.store.failures`), counting consecutive failed steps since the first
(a step that publishes, then fails in an after-publish hook, counts too),
removed by the next step that succeeds: as its batch is marked handled (a sync
that sees the batch handled sees the record gone), or by :func:`step_succeeded`
for a step that published nothing.
"""

from __future__ import annotations

import logging
import time

from app.store import STORE_ERRORS, ModelKeys
from workers.context import ModelRef, WorkerContext

logger = logging.getLogger(__name__)


def store_unreachable(exc: Exception) -> bool:
    """Whether ``exc`` means the store is unreachable (the whole pass fails, and is retried),
    not that this model's step failed; a learner's timeout is a ``TimeoutError``, which
    ``STORE_ERRORS`` would take for a socket's."""
    return isinstance(exc, STORE_ERRORS) and type(exc) is not TimeoutError


async def step_failed(ctx: WorkerContext, ref: ModelRef, exc: Exception) -> None:
    """Report a step of ``ref`` that raised ``exc`` and put its next read off."""
    n = ctx.pacer.failed(ref, time.monotonic())
    slot = ctx.slots.get(ref)
    if slot is not None:
        slot.read_size = None  # a smaller read next time: the failure may be its size
        slot.learner = None  # it may have learned part of a batch
    ctx.metrics.trainer_step_failures.inc()
    ctx.metrics.trainer_failing_models.set(len(ctx.pacer.failures))
    if n & (n - 1) == 0:  # 1, 2, 4, 8...: a model failing on every read does not flood the log
        logger.error("trainer: step %d of %s/%s failed; its events stay pending, retried "
                     "later", n, *ref, exc_info=exc)
    try:
        await ctx.store.failures.report(ModelKeys(*ref), f"{type(exc).__name__}: {exc}")
    except STORE_ERRORS as store_exc:
        logger.warning("trainer: could not record the failure of %s/%s (%s)", *ref, store_exc)


async def step_succeeded(ctx: WorkerContext, ref: ModelRef) -> None:
    """A step of ``ref`` went through: clear its failure record if it had one."""
    failed = ctx.pacer.succeeded(ref)
    if failed is None:
        return
    await ctx.store.failures.clear(ModelKeys(*ref))
    if failed:
        logger.info("trainer: %s/%s recovered after %d failed step(s)", *ref, failed)
        ctx.metrics.trainer_failing_models.set(len(ctx.pacer.failures))
