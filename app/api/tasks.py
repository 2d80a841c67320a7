"""Everything task-specific of the request path, in one table.

A :class:`TaskSpec` says how one task's feedback event is validated and
turned into the learner's feedback fields, and how a learner's decision
becomes the response.  Serving a new task means adding its event model to
:data:`app.api.schemas.feedback.FeedbackEvent`, its prediction model to
:data:`app.api.schemas.predict.Prediction` and one entry to :data:`TASKS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, TypeAdapter, ValidationError

from app.api.errors import ApiError, validation_error
from app.api.schemas.feedback import LabelFeedback
from app.api.schemas.predict import LabelPrediction, LabelSetPrediction
from app.learners.base import Learner
from app.learning import takes_clicks

FeedbackParser = Callable[[Any, Mapping[str, Any], type[Learner]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class TaskSpec:
    """How the API handles one task."""

    name: str
    feedback_model: type[BaseModel]
    prediction_model: type[BaseModel]
    feedback_fields: FeedbackParser
    """(validated event, model config, learner class) -> feedback arrays, or ApiError."""
    has_clicks: bool
    """Whether an unanswered decision may become a no-click event."""

    def parse_feedback(self, raw: Any, config: Mapping[str, Any], cls: type[Learner],
                       prefix: str = "") -> tuple[str, dict[str, np.ndarray]]:
        """Validate one raw event; return ``(event_id, feedback arrays)``."""
        if isinstance(raw, self.feedback_model):
            event = raw
        else:
            try:
                event = TypeAdapter(self.feedback_model).validate_python(raw)
            except ValidationError as exc:
                raise validation_error(exc.errors(), prefix) from None
        try:
            return event.event_id, self.feedback_fields(event, config, cls)  # type: ignore[attr-defined]
        except ApiError as exc:
            if prefix and exc.field:
                exc.field = f"{prefix}.{exc.field}"
            raise

    def prediction(self, output: Mapping[str, Any], event_id: str | None,
                   version: int) -> dict[str, Any]:
        """Response fields of one decision (only the fields of the response model)."""
        out = {name: output[name] for name in self.prediction_model.model_fields
               if name in output and output[name] is not None}
        out["model_version"] = version
        if event_id is not None:
            out["event_id"] = event_id
        return out


def _label_feedback(event: LabelFeedback, config: Mapping[str, Any],
                    cls: type[Learner]) -> dict[str, np.ndarray]:
    algorithm = config["algorithm"]
    if takes_clicks(cls):
        if event.label is not None:
            raise ApiError(422, "invalid_feedback", f"{algorithm!r} learns from a click, "
                           "not a label", "label")
        if event.click is None:
            raise ApiError(422, "invalid_feedback", f"{algorithm!r} learns from a click: "
                           "send {\"event_id\", \"click\": true|false}", "click")
        return {"click": np.array(float(event.click))}
    if event.click is not None:
        raise ApiError(422, "invalid_feedback", f"{algorithm!r} learns from a label, "
                       "not a click", "click")
    if event.label is None:
        raise ApiError(422, "invalid_feedback", f"{algorithm!r} learns from the true label: "
                       "send {\"event_id\", \"label\": k}", "label")
    if event.label >= config["n_classes"]:
        raise ApiError(422, "invalid_feedback",
                       f"label must be in [0, {config['n_classes']})", "label")
    return {"label": np.array(event.label, dtype=np.int64)}


TASKS: dict[str, TaskSpec] = {
    "label": TaskSpec("label", LabelFeedback, LabelPrediction, _label_feedback,
                      has_clicks=True),
    "label_set": TaskSpec("label_set", LabelFeedback, LabelSetPrediction, _label_feedback,
                          has_clicks=True),
}


def task_spec(task: str) -> TaskSpec:
    """The spec of a served task (422 naming ``task`` otherwise)."""
    spec = TASKS.get(task)
    if spec is None:
        raise ApiError(422, "invalid_param", f"task {task!r} is not served; choose one of "
                       f"{sorted(TASKS)}", "task")
    return spec
