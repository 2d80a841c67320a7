"""``drift.action: recover``: refit a model on the events since the change its detector saw.

On a detection (:mod:`workers.drift`) the model's trainer builds the model
afresh and has it learn, in order, the newest events of its decision log
from the estimated change on (:attr:`~app.learners.drift.DetectionReport.since`,
at most :data:`MAX_REFIT_EVENTS`); the result is published as a new version
with a ``drift_recovery`` marker in the log and kept, in one step
(:meth:`~app.store.versions.VersionStore.publish`), after the version it
replaces was kept as ``before drift recovery`` (so a rollback undoes it).
The applied stream id does not move: the events queued meanwhile apply on
top of the recovered version, once; the refit relearns logged events only,
none is applied twice to one version.  A publish refused because the model
changed meanwhile (a reset, rollback or promotion) drops the recovery.  The
estimated change is never before the detector's last restart (a reset,
rollback, import or promotion restarts it), so the events relearned are all
of the current model; with the decision log off the refit is a fresh model.

Why a refit from the log (``docs/results/drift.md`` has the numbers): the
detector sees an abrupt change some events after it happened (tens for a
label model, hundreds for a ranking), and a model that only forgets keeps
the old world's weight for some half-lives; the refit starts from the
change, with what the model saw of the new world already learned.  On a
stationary stream the detector raises at most about one false alarm per
million events, each costing one relearning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from app.features import row_spans
from app.learners.base import Batch, Learner, stack_events
from app.learners.build import MAX_REFIT_EVENTS, refit
from app.learners.config import ModelConfig
from app.learners.offpolicy import learn_finite
from app.store.decisionlog import LogEntry
from app.store.events import decode_entries, decode_entry
from app.store.keys import ModelKeys
from app.store.snapshots import PublishConflict
from app.store.versions import VersionPolicy

if TYPE_CHECKING:
    from workers.context import CachedLearner, ModelRef, WorkerContext

logger = logging.getLogger(__name__)

#: Decision-log marker and kept-version reason of a recovery.
RECOVERY_MARKER = "drift_recovery"


async def recover(ctx: WorkerContext, ref: ModelRef, cached: CachedLearner, since: int,
                  rates: tuple[float, float]) -> int | None:
    """Publish the model refitted on its last ``since`` logged events as a new version;
    ``cached`` becomes it.  Returns the version (None: the model changed meanwhile)."""
    mk = ModelKeys(*ref)
    started = time.monotonic()
    wanted = max(0, min(since, MAX_REFIT_EVENTS))
    entries = await _newest_entries(ctx, mk, wanted)
    learner, relearned = await asyncio.wait_for(
        asyncio.to_thread(_refit, cached.config, entries, wanted, rates,
                          ctx.config.max_dense_cells),
        ctx.config.handler_timeout)
    policy = VersionPolicy.of(cached.config)
    await ctx.store.versions.keep(mk, policy, reason="before drift recovery", interval=0.0,
                                  expected_version=cached.version)
    try:
        version = await ctx.store.versions.publish(
            mk, learner.get_state(), cached.version, policy, "drift recovery",
            RECOVERY_MARKER, {"relearned": relearned, "since": since})
    except PublishConflict as exc:
        logger.info("drift: recovery of %s/%s dropped (%s)", *ref, exc)
        return None
    cached.learner, cached.version = learner, version
    logger.warning("drift: %s/%s recovered as version %d (refitted on its last %d events in "
                   "%.2f s)", *ref, version, relearned, time.monotonic() - started)
    return version


async def _newest_entries(ctx: WorkerContext, mk: ModelKeys, events: int) -> list[LogEntry]:
    """The newest batch entries of the log holding at least ``events`` events, oldest first."""
    entries: list[LogEntry] = []
    seen = 0
    if events:
        async for entry in ctx.store.log.scan(mk, newest_first=True):
            if entry.is_marker:
                continue
            entries.append(entry)
            seen += entry.size
            if seen >= events:
                break
    entries.reverse()
    return entries


def _refit(config: ModelConfig, entries: list[LogEntry], events: int,
           rates: tuple[float, float], max_cells: int) -> tuple[Learner, int]:
    """A fresh learner for ``config`` that learned the last ``events`` events of ``entries``
    in order (CPU: run in a thread), and how many it learned.

    The events are decoded and learned in consecutive parts of at most ``max_cells`` dense
    cells (events x ``n_features``; the learners' contract: a batch learned in parts is the
    batch learned at once), so a wide model's refit holds one part dense at a time.
    """
    logged = [e for entry in entries for e in entry.events()][-events:] if events else []
    learner = refit(config, {}, rates)
    for rows in row_spans(len(logged), config.n_features, max_cells):
        part = logged[rows.start:rows.stop]
        learn_finite(learner, _batch([e.context for e in part], [e.feedback for e in part]))
    return learner, len(logged)


def _batch(contexts: list[bytes], feedbacks: list[bytes]) -> Batch:
    columns = decode_entries(contexts, feedbacks)
    if columns is not None:
        return columns
    return stack_events([decode_entry(c, f) for c, f in zip(contexts, feedbacks, strict=True)])
