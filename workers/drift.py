"""The trainer's drift step: each published batch's rewards go through the model's detector.

After a publish, the observed clicks of the batch (one per event, the
learner's :meth:`~app.learners.base.Learner.observed_clicks`, the signal the
reward counters use) update the model's Page-Hinkley detector
(:class:`app.learners.drift.PageHinkley`); its state and report are saved
beside the model (:class:`app.store.drift.DriftStore`) and shown by
``GET /v1/models/{id}`` as ``drift``.  A detection is logged, counted
(``noisyloop_drift_detections_total``) and alerted on (``deploy/prometheus``).
The detector is cached while this worker holds the model's lease and read
back from the store when it takes the model over.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from app.learners.drift import PageHinkley
from app.store.keys import ModelKeys

if TYPE_CHECKING:
    from workers.context import ModelRef, WorkerContext

logger = logging.getLogger(__name__)

#: What the detector watches (shown in the report).
SIGNAL = "reward"


async def observe(ctx: WorkerContext, ref: ModelRef, clicks: np.ndarray) -> None:
    """Feed a published batch's observed clicks to the model's detector and save it."""
    if clicks.shape[0] == 0:
        return
    mk = ModelKeys(*ref)
    cached = ctx.drift.get(ref)
    if cached is None:
        detector, detected_at = PageHinkley(), None
        state, saved = await ctx.store.drift.load(mk)
        if state is not None:
            detector.set_state(state)
            detected_at = (saved or {}).get("detected_at")
    else:
        detector, detected_at = cached
    found = detector.update(clicks)
    if found.detected_at:
        detected_at = time.time()
        ctx.metrics.drift_detections.labels(*ref).inc(len(found.detected_at))
        logger.warning("drift: the reward of %s/%s fell (event %d of the detector)",
                       *ref, found.detected_at[-1])
    ctx.drift[ref] = (detector, detected_at)
    ctx.metrics.drift_statistic.labels(*ref).set(found.statistic)
    await ctx.store.drift.save(mk, detector.get_state(), report(detector, detected_at))


def report(detector: PageHinkley, detected_at: float | None) -> dict[str, Any]:
    """The JSON report of a detector (``GET /v1/models/{id}``'s ``drift``)."""
    return {
        "status": detector.status(),
        "detections": detector.detections_,
        "detected_at": detected_at,
        "detected_at_event": detector.last_detection_ or None,
        "events": detector.count_,
        "signal": SIGNAL,
        "method": "page_hinkley",
        "statistic": round(detector.statistic_ - detector.minimum_, 3),
        "threshold": detector.threshold,
        "delta": detector.delta,
    }
