"""The trainer's features, in order, and how their hooks run.

Once a batch is published (:func:`workers.trainer.step`), and before it is
acknowledged, the ``after_publish`` hook of every feature of :data:`FEATURES`
gets the model's slot and the :class:`~workers.feature.Published` batch, in
registry order, in the trainer's shielded publish step; after each pass, the
``after_pass`` hooks catch up on the models that went quiet, in the reverse
order (as teardowns unwind: the last feature's first).  A feature is a module
that builds a :class:`~workers.feature.Feature` (:mod:`workers.feature`);
adding one is its module and one line here.

Each hook runs on its own: one that raises does not keep the next ones from
the batch; the step then fails with the first error once all ran
(:mod:`workers.failures` reports it and puts the model's next read off).
The batch is published by then and acknowledged after the hooks, failed or not: no
accepted event is lost.
"""

from __future__ import annotations

import logging
from typing import Any

from workers import anchors, autooptimize, challengers, drift, samples, series, versions
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published

logger = logging.getLogger(__name__)

#: In order: the NREst samples and the anchor rows of the batch, the kept version, the
#: quality series, the drift detector, the challengers, a Personalizer loop's
#: auto-optimization (after a pass, reversed: the quiet models' due series points, then their
#: newest versions kept).
FEATURES: tuple[Feature[Any], ...] = (
    samples.FEATURE, anchors.FEATURE, versions.FEATURE, series.FEATURE, drift.FEATURE,
    challengers.FEATURE, autooptimize.FEATURE)


async def run_after_publish(ctx: WorkerContext, slot: ModelSlot,
                            published: Published) -> Exception | None:
    """Every ``after_publish`` hook of :data:`FEATURES`, each on its own; returns the first
    error (None: all went through)."""
    first: Exception | None = None
    for feature in FEATURES:
        if feature.after_publish is None:
            continue
        try:
            await feature.after_publish(ctx, slot, published)
        except Exception as exc:
            if first is not None:
                logger.warning("trainer: after publishing %s/%s, %s failed too (%r)",
                               *slot.ref, feature.name, exc)
            first = first or exc
    return first


async def run_after_pass(ctx: WorkerContext) -> None:
    """Every ``after_pass`` hook of :data:`FEATURES`, in reverse order."""
    for feature in reversed(FEATURES):
        if feature.after_pass is not None:
            await feature.after_pass(ctx)
