"""The ``regression`` task: a real value; feedback: one or more noisy measurements of the
target, sent in parts until the learner has the labels it asks for."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.api.schemas.feedback import RegressionFeedback
from app.api.schemas.predict import RegressionPrediction
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.learners.registry import hyper_params
from app.tasks.base import OpenPolicy, Replay, Task


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
