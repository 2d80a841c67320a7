"""A task defined in the tests only, ``thumbs``: what share of decisions gets a thumb up.

Everything a task needs, in one module: its feedback and decision schemas, the parser of
its feedback, its learner and its :class:`~app.tasks.base.Task`.  ``docs/architecture.md``
("Adding a task") walks through the same steps; :mod:`tests.tasks.test_thumbs` registers
it and serves it end to end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel

from app.api.schemas.common import EventId, RequestModel
from app.learners.base import Decision, Event, Learner, ParamError, State, check_state
from app.tasks import Task

NAME = "thumbs"


class ThumbsFeedback(RequestModel):
    """Feedback of a ``thumbs`` decision: the thumb it got."""

    event_id: EventId
    thumb: Literal["up", "down"]


class ThumbsPrediction(BaseModel):
    """A ``thumbs`` decision: the share of thumbs up so far."""

    event_id: str | None = None
    model_version: int
    up_share: float


def thumbs_feedback(event: ThumbsFeedback, config: Mapping[str, Any],
                    cls: type[Learner]) -> dict[str, np.ndarray]:
    """``{"up": 1.0 | 0.0}``, the field the learner reads."""
    return {"up": np.array(float(event.thumb == "up"))}


class ThumbsShare(Learner):
    """The share of thumbs up, with ``prior`` pseudo-counts of each thumb.

    Parameters
    ----------
    n_features : int
        Length of the inputs (read, not learned from).
    prior : float
        Pseudo-counts of a thumb up and of a thumb down before any feedback (> 0).
    seed : int or None
        Unused: the share is deterministic.
    """

    task: ClassVar[str] = NAME
    feedback_fields: ClassVar[tuple[str, ...]] = ("up",)
    logged_only: ClassVar[bool] = True
    paper: ClassVar[str] = "a test fixture"

    def __init__(self, n_features: int, prior: float = 1.0, seed: int | None = None) -> None:
        if n_features < 1:
            raise ParamError("n_features", f"must be >= 1, got {n_features}")
        if not prior > 0:
            raise ParamError("prior", f"must be > 0, got {prior}")
        self.n_features, self.prior, self.seed = n_features, prior, seed
        self.counts_ = np.zeros(2)  # thumbs up, thumbs seen

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``counts_``: 2 floats."""
        return 16

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        up, seen = self.counts_
        return Decision({"up_share": float((up + self.prior) / (seen + 2 * self.prior))},
                        {"x": np.array(x, dtype=np.float64)})

    def learn_one(self, event: Event) -> None:
        self.counts_ += (float(event["up"]), 1.0)

    def get_state(self) -> State:
        return {"counts_": self.counts_.copy()}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self.counts_ = check_state(self.get_state(), state)["counts_"]


TASK = Task(NAME, "a share of thumbs up; feedback: a thumb up or down", ThumbsFeedback,
            ThumbsPrediction, thumbs_feedback, has_clicks=False)
