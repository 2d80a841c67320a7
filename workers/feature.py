"""What a trainer feature is: the hook points it uses and the per-model state it owns.

A feature (the NREst samples, the anchor rows, kept versions, the quality
series, the drift detector, the challengers) is a module that builds one
:class:`Feature`: its name, the factory of its state of one model, and its
hooks.  The trainer knows none of them by name: it runs the hooks of the
registry, :data:`workers.hooks.FEATURES`, and keeps each feature's state in the
model's :class:`~workers.context.ModelSlot` under the feature's name (dropped
with the slot when the trainer lease goes), never reading it.

Hook points:

``after_publish(ctx, slot, published)``
    after each batch the trainer published (:class:`Published`), inside the
    shielded publish-then-acknowledge step;
``after_pass(ctx)``
    after each trainer pass, to catch up on the models that applied nothing in it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import numpy as np

from app.learners.base import Batch, Learner
from app.learners.config import ModelConfig
from app.store.delivery import TrainerView
from workers.context import CachedLearner, ModelSlot, WorkerContext

S = TypeVar("S")


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


AfterPublish = Callable[[WorkerContext, ModelSlot, Published], Awaitable[None]]
"""A step after each published batch of a model."""
AfterPass = Callable[[WorkerContext], Awaitable[None]]
"""A step after each trainer pass (for the models that applied nothing in it)."""


@dataclass(frozen=True)
class Feature(Generic[S]):
    """One trainer feature: its hooks (None: it does not use that hook point) and the
    factory of its state of one model.

    >>> counts = Feature("counts", state_factory=dict)
    >>> slot = ModelSlot(("t", "m"))
    >>> counts.state(slot)["batches"] = 1
    >>> counts.state(slot), slot.states
    ({'batches': 1}, {'counts': {'batches': 1}})
    """

    name: str
    """The key of its state in a model's slot (unique in the registry)."""
    state_factory: Callable[[], S] | None = None
    """Makes its state of a model, the first time the feature asks for it (None: it keeps
    none)."""
    after_publish: AfterPublish | None = None
    after_pass: AfterPass | None = None

    def state(self, slot: ModelSlot) -> S:
        """The feature's state of the model in ``slot``, made by :attr:`state_factory` the
        first time it is asked for."""
        states = slot.states
        if self.name not in states:
            if self.state_factory is None:
                raise TypeError(f"the {self.name} feature keeps no state")
            states[self.name] = self.state_factory()
        return cast(S, states[self.name])
