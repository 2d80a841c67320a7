"""The ``noisy_label`` task: a class; feedback: a class label flipped by a confusion matrix,
and gold examples that carry the checked class beside the noisy one."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.errors import ApiError
from app.features import check_norms, feature_bound, to_vector
from app.fields import ClassIndex, EventId, Features, RequestModel, exactly_one_of, one_of_schema
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.tasks.base import Replay, Task


class NoisyLabelFeedback(RequestModel):
    """Feedback of the ``noisy_label`` task: a class label, as the noise source gave it.

    Either for a prediction (``event_id``) or a standalone example
    (``features``, no prior prediction needed).  A gold example
    (``"gold": true``) carries the checked, correct class in ``label`` and
    the label the noise source gave for the same example in
    ``noisy_label``; UMA estimates the confusion matrix from these pairs
    (and needs ``noisy_label``; the ``perceptron`` learns from ``label``).
    """

    model_config = ConfigDict(json_schema_extra=one_of_schema("event_id", "features"))

    event_id: EventId | SkipJsonSchema[None] = None
    features: Features | SkipJsonSchema[None] = None
    label: ClassIndex
    gold: bool = Field(default=False, strict=True,
                       description="true: `label` is known to be the correct class")
    noisy_label: ClassIndex | None = Field(default=None, description="gold examples: the label the "
                                                                "noise source gave")

    @model_validator(mode="after")
    def _one_source(self) -> NoisyLabelFeedback:
        exactly_one_of(self, ("event_id", "features"),
                       "give exactly one of 'event_id' (feedback for a prediction) "
                       "or 'features' (an example without a prediction)")
        return self


class NoisyLabelPrediction(BaseModel):
    """A decision of the ``noisy_label`` task: the predicted true class."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    label: int
    model_version: int


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
