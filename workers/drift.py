"""The trainer's drift step: each published batch's rewards go through the model's detector.

After a publish, the observed clicks of the batch (one per event, the
learner's :meth:`~app.learners.base.Learner.observed_clicks`, the signal the
reward counters use), each in its stratum
(:meth:`~app.learners.base.Learner.drift_strata`), update the model's Page-Hinkley detector
(:class:`app.learners.drift.PageHinkley`); its state and report are saved
beside the model (:class:`app.store.drift.DriftStore`) and shown by
``GET /v1/models/{id}`` as ``drift``.  What a detection does is the model's
``drift.action`` (:class:`app.store.drift.DriftPolicy`): with ``alert`` it is
logged, counted (``noisyloop_drift_detections_total``, alerted on in
``deploy/prometheus``), marked in the decision log (a ``drift`` marker) and
listed in the report's ``history`` (the console marks it on the reward
chart); ``recover`` also refits the model on the events since the estimated
change (:mod:`workers.recovery`), except on a model that does not learn
(``mode: logging``), which it only alerts; ``none`` runs no detector.

The detector is the feature's state of the model (:class:`Watching`, in its
slot: :mod:`workers.feature`) while this worker holds the model's lease, and
read back from the store when it takes the model over.  It follows one model
lineage: when the batch was learned on a version other than the one the
detector last saw (a reset, rollback, import or promotion published
meanwhile) it restarts (:meth:`~app.learners.drift.PageHinkley.restart`)
before it takes the batch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.learners.drift import PageHinkley
from app.store.drift import METHOD, SIGNAL, DriftPolicy
from app.store.keys import ModelKeys
from workers import ModelRef, recovery
from workers.context import CachedLearner, ModelSlot, WorkerContext
from workers.feature import Feature, Published

logger = logging.getLogger(__name__)

#: Detections the report lists (the newest).
HISTORY = 20


@dataclass
class DriftWatch:
    """A model's detector as its trainer keeps it."""

    detector: PageHinkley = field(default_factory=PageHinkley)
    detected_at: float | None = None
    """Unix time of the last detection since the detector's last restart."""
    version: int | None = None
    """The model version the detector is in step with (None: not known yet)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """The newest :data:`HISTORY` detections (time, event, since, recovered version)."""


@dataclass
class Watching:
    """A model's drift detector as this trainer holds it (the feature's state)."""

    watch: DriftWatch | None = None
    """None: read from the store at the model's next batch."""


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """The hook after a publish: :func:`observe` the batch's clicks."""
    await observe(ctx, slot, published.cached, published.view.info.version, published.clicks,
                  published.rates, published.learner.drift_strata(published.applied))


async def observe(ctx: WorkerContext, slot: ModelSlot, cached: CachedLearner, learned_on: int,
                  clicks: np.ndarray, rates: tuple[float, float],
                  strata: np.ndarray | None = None) -> None:
    """Feed a batch's observed clicks (in their ``strata``; None: one), learned on version
    ``learned_on`` and published as ``cached.version``, to the model's detector, act on a
    detection, save the detector."""
    action = DriftPolicy.of(cached.config).action
    if clicks.shape[0] == 0 or action == "none":
        return
    if action == "recover" and not cached.config.learns:
        action = "alert"  # a refit would learn: a model that does not learn is only alerted
    ref = slot.ref
    mk = ModelKeys(*ref)
    watching = FEATURE.state(slot)
    watch = watching.watch or await _load(ctx, mk)
    if watch.version is not None and watch.version != learned_on:
        watch.detector.restart()  # the model changed under the detector
        watch.detected_at = None
    found = watch.detector.update(clicks, strata)
    watch.version = cached.version
    if found.detected_at:
        watch.detected_at = time.time()
        ctx.metrics.drift_detections.labels(*ref).inc(len(found.detected_at))
        logger.warning("drift: the reward of %s/%s fell (event %d of the detector, about %d "
                       "events after the change)", *ref, found.detected_at[-1], found.since[-1])
        detection = {"time": watch.detected_at, "event": found.detected_at[-1],
                     "since": found.since[-1], "action": action}
        await ctx.store.drift.mark(mk, detection)
        if action == "recover":
            detection["recovered_version"] = watch.version = await _recover(
                ctx, ref, cached, found.since[-1], rates)
        watch.history = [*watch.history, detection][-HISTORY:]
    watching.watch = watch
    ctx.metrics.drift_statistic.labels(*ref).set(found.statistic)
    await ctx.store.drift.save(mk, watch.detector.get_state(), report(watch))


async def _recover(ctx: WorkerContext, ref: ModelRef, cached: CachedLearner, since: int,
                   rates: tuple[float, float]) -> int:
    """The model's version after a recovery (unchanged when it was dropped or failed: it
    never fails the trainer's step, whose batch is published)."""
    try:
        await recovery.recover(ctx, ref, cached, since, rates)
    except Exception:
        logger.exception("drift: recovery of %s/%s failed", *ref)
    ctx.metrics.model_version.labels(*ref).set(cached.version)
    return cached.version


async def _load(ctx: WorkerContext, mk: ModelKeys) -> DriftWatch:
    """The detector as the model's last trainer saved it (a new one before the first)."""
    watch = DriftWatch()
    state, saved = await ctx.store.drift.load(mk)
    if state is not None:
        watch.detector.set_state(state)
    saved = saved or {}
    watch.detected_at = saved.get("detected_at")
    watch.version = saved.get("version")
    watch.history = list(saved.get("history") or [])
    return watch


def report(watch: DriftWatch) -> dict[str, Any]:
    """The JSON report of a detector (``GET /v1/models/{id}``'s ``drift``)."""
    detector = watch.detector
    return {
        "status": detector.status(),
        "detections": detector.detections_,
        "detected_at": watch.detected_at,
        "detected_at_event": detector.last_detection_ or None,
        "events": detector.count_,
        "signal": SIGNAL,
        "method": METHOD,
        "statistic": round(detector.statistic_ - detector.minimum_, 3),
        "threshold": detector.threshold,
        "delta": detector.delta,
        "version": watch.version,
        "history": watch.history,
    }


FEATURE = Feature("drift", state_factory=Watching, after_publish=after_publish)
