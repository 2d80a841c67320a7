"""The ``label`` task: one label out of ``n_classes``; feedback: a (noisy) click or the label."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, Field

from app.errors import ApiError
from app.evaluation.shapes import LABEL_SHAPE
from app.fields import EVENT_ID_PATTERN, ClassIndex, EventId, RequestModel
from app.learners.base import Learner
from app.learners.config import ModelConfig, takes_clicks
from app.learners.proxy import CALIBRATION_BETA_MIN
from app.tasks.base import Replay, Task


def _strict_click(value: Any) -> bool:
    """A click is a JSON boolean: a string or a number (``1``/``0`` included) is never taken
    for one."""
    if isinstance(value, bool):
        return value
    raise ValueError("click must be true or false (a JSON boolean, not a number or a string)")


Click = Annotated[bool, BeforeValidator(_strict_click)]


class LabelFeedback(RequestModel):
    """Feedback of the ``label`` and ``label_set`` tasks.

    Bandit algorithms take ``click`` (the right label was shown / is in the
    shown set, as observed, i.e. possibly noisy); full-information ones
    (``perceptron``, ``mc_slp``) take the true ``label``.
    """

    event_id: EventId
    click: Click | None = None
    label: ClassIndex | None = None


class LabelPrediction(BaseModel):
    """A decision of the ``label`` task."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    label: int
    probability: float
    greedy_label: int
    model_version: int
    expected_reward: float | None = Field(
        default=None, description="ridge learners: the calibrated click probability of the "
                                  "played label, (mu - rho0) / (1 - rho0 - rho1) clipped to [0, 1]")
    calibration_unreliable: bool | None = Field(
        default=None, description=f"with expected_reward: true while the noise rates await "
                                  f"an estimate (noise status insufficient_data) or when "
                                  f"1 - rho0 - rho1 < {CALIBRATION_BETA_MIN}, where dividing by "
                                  "it magnifies every error of the predicted rate")


class LabelSetPrediction(BaseModel):
    """A decision of the ``label_set`` task: ``m`` labels in draw order."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    labels: list[int]
    probability: float
    greedy_labels: list[int]
    model_version: int


def label_feedback(event: LabelFeedback, config: ModelConfig,
                   cls: type[Learner]) -> dict[str, np.ndarray]:
    """``click`` for a learner of clicks, else the true ``label`` (checked against
    ``n_classes``)."""
    algorithm = config.algorithm
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
    if event.label >= config.class_count:
        raise ApiError(422, "invalid_feedback",
                       f"label must be in [0, {config.n_classes})", "label")
    return {"label": np.array(event.label, dtype=np.int64)}


def _read_only(value: float) -> np.ndarray:
    array = np.array(value)
    array.setflags(write=False)
    return array


#: The feedback array of a click and of no click, shared by all quickly parsed events.
_CLICK = {True: _read_only(1.0), False: _read_only(0.0)}
_EVENT_ID = re.compile(EVENT_ID_PATTERN)


def quick_click(raw: Any, cls: type[Learner]) -> tuple[str, dict[str, np.ndarray]] | None:
    """``(event_id, {"click": 0.0 | 1.0})`` of a raw event that is exactly
    ``{"event_id": <valid id>, "click": true | false}`` for a learner of clicks, else None.

    The same fields as :func:`label_feedback` of the validated
    :class:`LabelFeedback`, at a fraction of the CPU: a feedback batch is
    1,000 such events (``docs/benchmarks/service.md``).

    >>> from app.learners.registry import learner_class
    >>> quick_click({"event_id": "e1", "click": True}, learner_class("label", "rcnbf"))
    ('e1', {'click': array(1.)})
    >>> [quick_click(raw, learner_class("label", "rcnbf")) for raw in (
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


def _click(fields: Mapping[str, np.ndarray]) -> float:
    return float(fields["click"])


TASK = Task(
    "label", "one label out of `n_classes`; feedback: a (noisy) click on the played label",
    LabelFeedback, LabelPrediction, label_feedback, has_clicks=True, needs_classes=True,
    quick_feedback=quick_click, reward=_click, log_shape=LABEL_SHAPE,
    replay=Replay("app.replay.label", service=True, drift=True))
