"""The ``noisy_label`` task: a class; feedback: a class label flipped by a confusion matrix,
and gold examples that carry the checked class beside the noisy one."""

from __future__ import annotations

import numpy as np

from app.api.errors import ApiError
from app.api.features import check_norms, feature_bound, to_vector
from app.api.schemas.feedback import NoisyLabelFeedback
from app.api.schemas.predict import NoisyLabelPrediction
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.tasks.base import Replay, Task


def noisy_label_feedback(event: NoisyLabelFeedback, config: ModelConfig,
                         cls: type[Learner]) -> dict[str, np.ndarray]:
    """UMA's ``label`` (noisy), ``gold``, ``true_label``; the perceptron's ``label``.

    A gold example's ``label`` is the checked class and ``noisy_label`` the
    label the noise gave: UMA buffers the noisy one (its updates assume
    every buffered label went through the noise) and counts the pair.
    """
    n_classes = config.n_classes
    for name in ("label", "noisy_label"):
        value = getattr(event, name)
        if value is not None and value >= n_classes:
            raise ApiError(422, "invalid_feedback", f"{name} must be in [0, {n_classes})", name)
    if event.noisy_label is not None and not event.gold:
        raise ApiError(422, "invalid_feedback", "noisy_label goes with \"gold\": true (the "
                       "label of a non-gold example is the noisy one)", "noisy_label")
    fields: dict[str, np.ndarray]
    if "gold" not in cls.feedback_fields:
        fields = {"label": np.array(event.label, dtype=np.int64)}
    elif event.gold:
        if event.noisy_label is None:
            raise ApiError(422, "invalid_feedback", f"{config.algorithm!r} estimates the "
                           "confusion matrix from gold examples: send the label the noise "
                           "source gave as noisy_label (and the correct class as label)",
                           "noisy_label")
        fields = {"label": np.array(event.noisy_label, dtype=np.int64),
                  "gold": np.array(1, dtype=np.int64),
                  "true_label": np.array(event.label, dtype=np.int64)}
    else:
        fields = {"label": np.array(event.label, dtype=np.int64),
                  "gold": np.array(0, dtype=np.int64),
                  "true_label": np.array(-1, dtype=np.int64)}
    if event.features is not None:
        fields["x"] = to_vector(event.features, config.n_features)
        check_norms(fields["x"], feature_bound(config), "features")
    return fields


TASK = Task(
    "noisy_label", "a class; feedback: a class label flipped by a confusion matrix",
    NoisyLabelFeedback, NoisyLabelPrediction, noisy_label_feedback, has_clicks=False,
    needs_classes=True, replay=Replay("app.replay.noisy_label"))
