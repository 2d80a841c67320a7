"""Everything task-specific of the request path, in one table.

A :class:`TaskSpec` says how one task's feedback event is validated and
turned into the learner's feedback fields, and how a learner's decision
becomes the response.  Serving a new task means adding its event model to
:data:`app.api.schemas.feedback.FeedbackEvent`, its prediction model to
:data:`app.api.schemas.predict.Prediction` and one entry to :data:`TASKS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from app.api.errors import ApiError, validation_error
from app.api.features import check_norms, feature_bound, to_vector
from app.api.ranking import feedback_fields as rank_feedback_fields
from app.api.ranking import join_shown
from app.api.schemas.common import EVENT_ID_PATTERN
from app.api.schemas.feedback import (
    LabelFeedback,
    NoisyInputFeedback,
    NoisyLabelFeedback,
    RegressionFeedback,
)
from app.api.schemas.predict import (
    LabelPrediction,
    LabelSetPrediction,
    NoisyInputPrediction,
    NoisyLabelPrediction,
    RegressionPrediction,
)
from app.api.schemas.rank import RankFeedback, RankResponse
from app.evaluation.policies import LABEL_POLICIES
from app.evaluation.rankings import RANK_POLICIES
from app.learners.base import Learner
from app.learners.build import takes_clicks
from app.learners.kernels.functions import make_loss
from app.learners.registry import hyper_params

FeedbackParser = Callable[[Any, Mapping[str, Any], type[Learner]], dict[str, np.ndarray]]
QuickParser = Callable[[Any, type[Learner]], tuple[str, dict[str, np.ndarray]] | None]
ContextJoin = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
                       dict[str, np.ndarray]]
WantedCount = Callable[[Learner, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], int]


@dataclass(frozen=True)
class OpenPolicy:
    """How a task's decision stays open until enough feedback parts arrived.

    The first part's ``part_field`` rows (noisy labels, noisy copies) are counted
    against ``first_wanted``; while fewer arrived, the 202 response says
    ``reply: k`` and later parts (same ``event_id``) append rows.  ``fixed``
    fields come with the first part; later parts repeat them or omit them.
    See :mod:`app.api.openfeedback`.
    """

    part_field: str
    reply: str
    fixed: tuple[str, ...]
    first_wanted: WantedCount
    """(learner, logged context, first part's fields) -> rows wanted in total."""
    budgeted: bool
    """Whether a model's ``label_budget`` may raise the wanted count of a 1-row first part."""
    enqueue_on_expiry: bool
    """Whether an open decision that times out is learned from with the rows received."""


@dataclass(frozen=True)
class TaskSpec:
    """How the API handles one task."""

    name: str
    feedback_model: type[BaseModel]
    prediction_model: type[BaseModel]
    feedback_fields: FeedbackParser
    """(validated event, model config, learner class) -> feedback arrays, or ApiError.
    Examples without a prior decision (no ``event_id``) also get their input as ``x``."""
    has_clicks: bool
    """Whether an unanswered decision may become a no-click event."""
    open_feedback: OpenPolicy | None = None
    """Feedback in parts (more labels / copies), or None: one event joins at once."""
    quick_feedback: QuickParser | None = None
    """(raw event, learner class) -> ``(event_id, feedback arrays)`` of the task's most
    common event shape, without building its pydantic model; None for any other raw
    event (the full validation then parses it, errors included)."""
    join_context: ContextJoin | None = None
    """(parsed feedback, logged context) -> the feedback arrays to join, or ApiError: for
    feedback that refers to what the decision showed (read before the exactly-once join);
    None: the parsed arrays join as they are."""
    reward: Callable[[Mapping[str, np.ndarray]], float] | None = None
    """(joined feedback arrays) -> the observed reward of what was served (the click; slot 0's
    for a ranking), counted for the decisions made in apprentice mode; None: no apprentice
    mode."""
    evaluation_policies: tuple[str, ...] = ()
    """The kinds of policy (:func:`app.evaluation.policies.policy_kind`) a queued
    evaluation of the task's decision log takes; empty: its log is not evaluated."""

    def parse_feedback(self, raw: Any, config: Mapping[str, Any], cls: type[Learner],
                       prefix: str = "") -> tuple[str | None, dict[str, np.ndarray]]:
        """Validate one raw event; return ``(event_id, feedback arrays)``.

        ``event_id`` is None for an example posted without a prior decision
        (its arrays then hold its input ``x``).
        """
        if self.quick_feedback is not None:
            quick = self.quick_feedback(raw, cls)
            if quick is not None:
                return quick
        if isinstance(raw, self.feedback_model):
            event = raw
        else:
            try:
                event = self.feedback_model.model_validate(raw)
            except ValidationError as exc:
                raise validation_error(exc.errors(), prefix,
                                       fields=list(self.feedback_model.model_fields),
                                       what=f"feedback of a {self.name!r} model") from None
        try:
            return (getattr(event, "event_id", None),
                    self.feedback_fields(event, config, cls))
        except ApiError as exc:
            if prefix and exc.field:
                exc.field = f"{prefix}.{exc.field}"
            raise

    def prediction(self, output: Mapping[str, Any], event_id: str | None,
                   version: int) -> dict[str, Any]:
        """Response fields of one decision (only the fields of the response model)."""
        out = {name: output[name] for name in _field_names(self.prediction_model)
               if name in output and output[name] is not None}
        out["model_version"] = version
        if event_id is not None:
            out["event_id"] = event_id
        return out


@cache
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """A response model's field names (read once: the per-decision path needs them)."""
    return tuple(model.model_fields)


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


def _read_only(value: float) -> np.ndarray:
    array = np.array(value)
    array.setflags(write=False)
    return array


#: The feedback array of a click and of no click, shared by all quickly parsed events.
_CLICK = {True: _read_only(1.0), False: _read_only(0.0)}
_EVENT_ID = re.compile(EVENT_ID_PATTERN)


def _quick_click(raw: Any, cls: type[Learner]) -> tuple[str, dict[str, np.ndarray]] | None:
    """``(event_id, {"click": 0.0 | 1.0})`` of a raw event that is exactly
    ``{"event_id": <valid id>, "click": true | false}`` for a learner of clicks, else None.

    The same fields as :func:`_label_feedback` of the validated
    :class:`LabelFeedback`, at a fraction of the CPU: a feedback batch is
    1,000 such events (``docs/benchmarks/service.md``).

    >>> from app.learners.registry import learner_class
    >>> _quick_click({"event_id": "e1", "click": True}, learner_class("label", "rcnbf"))
    ('e1', {'click': array(1.)})
    >>> [_quick_click(raw, learner_class("label", "rcnbf")) for raw in (
    ...     {"event_id": "e1", "click": 1}, {"event_id": "e 1", "click": True},
    ...     {"event_id": "e1", "click": True, "label": 2}, ["e1", True])]
    [None, None, None, None]
    """
    if type(raw) is not dict or len(raw) != 2 or not takes_clicks(cls):
        return None
    event_id, click = raw.get("event_id"), raw.get("click")
    if type(event_id) is not str or type(click) is not bool or not _EVENT_ID.fullmatch(event_id):
        return None
    return event_id, {"click": _CLICK[click]}


def _regression_feedback(event: RegressionFeedback, config: Mapping[str, Any],
                         cls: type[Learner]) -> dict[str, np.ndarray]:
    """``values`` (noisy labels) and ``variance`` (``NaN`` = unknown), as ORS/NLMS read them."""
    variance = np.nan if event.variance is None else event.variance
    return {"values": np.array(event.values, dtype=np.float64),
            "variance": np.array(variance, dtype=np.float64)}


def _noisy_label_feedback(event: NoisyLabelFeedback, config: Mapping[str, Any],
                          cls: type[Learner]) -> dict[str, np.ndarray]:
    """UMA's ``label`` (noisy), ``gold``, ``true_label``; the perceptron's ``label``.

    A gold example's ``label`` is the checked class and ``noisy_label`` the
    label the noise gave: UMA buffers the noisy one (its updates assume
    every buffered label went through the noise) and counts the pair.
    """
    n_classes = config["n_classes"]
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
            raise ApiError(422, "invalid_feedback", f"{config['algorithm']!r} estimates the "
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
        fields["x"] = to_vector(event.features, config["n_features"])
        check_norms(fields["x"], feature_bound(config), "features")
    return fields


def _noisy_input_feedback(event: NoisyInputFeedback, config: Mapping[str, Any],
                          cls: type[Learner]) -> dict[str, np.ndarray]:
    """``copies`` as a ``(k, n_features)`` array and ``target`` (when given)."""
    d = config["n_features"]
    for i, row in enumerate(event.copies):
        if len(row) != d:
            raise ApiError(422, "invalid_feedback", f"each copy has n_features = {d} numbers, "
                           f"got {len(row)}", f"copies[{i}]")
    fields = {"copies": np.array(event.copies, dtype=np.float64).reshape(len(event.copies), d)}
    check_norms(fields["copies"], feature_bound(config), "copies", "copies[{}]")
    params = config["params"]
    if (event.target is not None and make_loss(params["loss"], params["smoothing"]).classification
            and event.target not in (-1.0, 1.0)):
        raise ApiError(422, "invalid_feedback", f"loss {params['loss']!r} is a classification "
                       "loss: target must be -1 or +1", "target")
    if event.target is not None:
        fields["target"] = np.array(event.target, dtype=np.float64)
    return fields


def _click(fields: Mapping[str, np.ndarray]) -> float:
    return float(fields["click"])


def _top_click(fields: Mapping[str, np.ndarray]) -> float:
    return float(fields["clicks"][0])


def _labels_sent(learner: Learner, context: Mapping[str, np.ndarray],
                 fields: Mapping[str, np.ndarray]) -> int:
    """The labels sent, or more if the learner needs more per event (``labels_per_event``)."""
    least = learner.labels_per_event(hyper_params(learner))
    return max(int(fields["values"].shape[0]), least)


def _copies_needed(learner: Learner, context: Mapping[str, np.ndarray],
                   fields: Mapping[str, np.ndarray]) -> int:
    return int(learner.copies_needed(context))  # type: ignore[attr-defined]


TASKS: dict[str, TaskSpec] = {
    "label": TaskSpec("label", LabelFeedback, LabelPrediction, _label_feedback,
                      has_clicks=True, quick_feedback=_quick_click, reward=_click,
                      evaluation_policies=LABEL_POLICIES),
    "label_set": TaskSpec("label_set", LabelFeedback, LabelSetPrediction, _label_feedback,
                          has_clicks=True, quick_feedback=_quick_click),
    "regression": TaskSpec(
        "regression", RegressionFeedback, RegressionPrediction, _regression_feedback,
        has_clicks=False,
        open_feedback=OpenPolicy("values", "more_labels", ("variance",), _labels_sent,
                                 budgeted=True, enqueue_on_expiry=True)),
    "noisy_label": TaskSpec("noisy_label", NoisyLabelFeedback, NoisyLabelPrediction,
                            _noisy_label_feedback, has_clicks=False),
    "noisy_input": TaskSpec(
        "noisy_input", NoisyInputFeedback, NoisyInputPrediction, _noisy_input_feedback,
        has_clicks=False,
        open_feedback=OpenPolicy("copies", "more_copies", ("target",), _copies_needed,
                                 budgeted=False, enqueue_on_expiry=False)),
    "rank": TaskSpec("rank", RankFeedback, RankResponse, rank_feedback_fields, has_clicks=True,
                     join_context=join_shown, reward=_top_click,
                     evaluation_policies=RANK_POLICIES),
}


def task_spec(task: str) -> TaskSpec:
    """The spec of a served task (422 naming ``task`` otherwise)."""
    spec = TASKS.get(task)
    if spec is None:
        raise ApiError(422, "invalid_param", f"task {task!r} is not served; choose one of "
                       f"{sorted(TASKS)}", "task")
    return spec
