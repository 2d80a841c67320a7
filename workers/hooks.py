"""The trainer's steps after a publish: a tuple of hooks, one module each, run in order.

Once a batch is published (:func:`workers.trainer.step`), and before it is acknowledged,
every hook of :data:`AFTER_PUBLISH_HOOKS` gets the model's slot and the
:class:`Published` batch, in the trainer's shielded publish step; after each
pass, every hook of :data:`AFTER_PASS_HOOKS` catches up on the models that
went quiet.  A hook is a module (or any object) with the function of the
protocol; adding one is its module and one line here.

Each hook runs on its own: one that raises does not keep the next ones from
the batch; the step then fails with the first error once all ran
(:mod:`workers.failures` reports it and puts the model's next read off).
The batch is published by then and acknowledged after the hooks, failed or not: no
accepted event is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from app.learners.base import Batch, Learner
from app.learners.config import ModelConfig
from app.store.delivery import TrainerView
from workers import anchors, challengers, drift, samples, series, versions

if TYPE_CHECKING:
    from workers.context import CachedLearner, ModelSlot, WorkerContext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Published:
    """One batch the trainer just published, as the hooks see it."""

    view: TrainerView
    """What the trainer read of the model before the batch (counters, noise record)."""
    config: ModelConfig
    learner: Learner
    """The model as published."""
    version: int
    """The version published (the snapshot was at ``version - 1`` before)."""
    applied: Batch
    """The applied events, columnar."""
    observed: np.ndarray
    """Which rows of ``applied`` are real feedback (not a sweeper's default event)."""
    clicks: np.ndarray
    """The learner's observed click of each applied event (the reward counters' signal)."""
    last_id: str
    """The stream id of the batch's last entry."""
    rates: tuple[float, float]
    """The noise rates ``(rho0, rho1)`` the batch was learned with."""
    cached: CachedLearner
    """The trainer's cached learner of the model (a hook that publishes a version of its
    own, as the drift recovery does, moves it to that version)."""


class AfterPublish(Protocol):
    """A step after each published batch of a model."""

    async def after_publish(self, ctx: WorkerContext, slot: ModelSlot,
                            published: Published) -> None: ...


class AfterPass(Protocol):
    """A step after each trainer pass (for the models that applied nothing in it)."""

    async def after_pass(self, ctx: WorkerContext) -> None: ...


#: In order: the NREst samples and the anchor rows of the batch, the kept version, the
#: quality series, the drift detector, the challengers.
AFTER_PUBLISH_HOOKS: tuple[AfterPublish, ...] = (
    samples, anchors, versions, series, drift, challengers)
#: The models that went quiet: their due series point, their newest version kept.
AFTER_PASS_HOOKS: tuple[AfterPass, ...] = (series, versions)


async def run_after_publish(ctx: WorkerContext, slot: ModelSlot,
                            published: Published) -> Exception | None:
    """Every hook of :data:`AFTER_PUBLISH_HOOKS`, each on its own; returns the first error
    (None: all went through)."""
    first: Exception | None = None
    for hook in AFTER_PUBLISH_HOOKS:
        try:
            await hook.after_publish(ctx, slot, published)
        except Exception as exc:
            if first is not None:
                logger.warning("trainer: after publishing %s/%s, %s failed too (%r)",
                               *slot.ref, _name(hook), exc)
            first = first or exc
    return first


async def run_after_pass(ctx: WorkerContext) -> None:
    """Every hook of :data:`AFTER_PASS_HOOKS`, in order."""
    for hook in AFTER_PASS_HOOKS:
        await hook.after_pass(ctx)


def _name(hook: object) -> str:
    return str(getattr(hook, "__name__", type(hook).__name__))
