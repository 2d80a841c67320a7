"""The ``regression`` task: a real value; feedback: one or more noisy measurements of the
target, sent in parts until the learner has the labels it asks for."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel, Field

from app.fields import MAX_PARTS, EventId, FiniteFloat, RequestModel
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.learners.registry import hyper_params
from app.tasks.base import OpenPolicy, Replay, Task


class RegressionFeedback(RequestModel):
    """Feedback of the ``regression`` task: one or more noisy labels of the target.

    When the model's label budget wants more labels for this event, the 202
    response carries ``more_labels: k``; send them with the same
    ``event_id`` (``{"event_id", "values": [...]}``) until none is wanted.
    """

    event_id: EventId
    values: list[FiniteFloat] = Field(min_length=1, max_length=MAX_PARTS,
                                      description="noisy labels of the event's target")
    variance: FiniteFloat | None = Field(
        default=None, ge=0, description="known noise variance of each label (omit if unknown); "
                                        "a later part of the same event must repeat it or omit it")


class RegressionPrediction(BaseModel):
    """A decision of the ``regression`` task: the predicted value."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    value: float
    model_version: int


def regression_feedback(event: RegressionFeedback, config: ModelConfig,
                        cls: type[Learner]) -> dict[str, np.ndarray]:
    """``values`` (noisy labels) and ``variance`` (``NaN`` = unknown), as ORS/NLMS read them."""
    variance = np.nan if event.variance is None else event.variance
    return {"values": np.array(event.values, dtype=np.float64),
            "variance": np.array(variance, dtype=np.float64)}


def _labels_sent(learner: Learner, context: Mapping[str, np.ndarray],
                 fields: Mapping[str, np.ndarray]) -> int:
    """The labels sent, or more if the learner needs more per event (``labels_per_event``)."""
    least = learner.labels_per_event(hyper_params(learner))
    return max(int(fields["values"].shape[0]), least)


TASK = Task(
    "regression", "a real value; feedback: one or more noisy measurements of the target",
    RegressionFeedback, RegressionPrediction, regression_feedback, has_clicks=False,
    open_feedback=OpenPolicy("values", "more_labels", ("variance",), _labels_sent,
                             budgeted=True, enqueue_on_expiry=True),
    replay=Replay("app.replay.regression"))
