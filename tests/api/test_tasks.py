"""The quick click parser answers exactly as the full validation of a feedback event."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.api.errors import ApiError
from app.learners.config import ModelConfig
from app.learners.registry import learner_class
from app.tasks import TASKS
from app.tasks.label import quick_click

CONFIG = ModelConfig.of({"model_id": "m", "task": "label", "algorithm": "rcnbf", "n_classes": 10,
                         "n_features": 4})

RAW_EVENTS: list[Any] = [
    {"event_id": "e1", "click": True},
    {"event_id": "e1", "click": False},
    {"click": False, "event_id": "A-b_9" * 12 + "abcd"},  # 64 characters, keys reordered
    {"event_id": "A" * 65, "click": True},
    {"event_id": "e1\n", "click": True},
    {"event_id": "", "click": True},
    {"event_id": "e/1", "click": True},
    {"event_id": 7, "click": True},
    {"event_id": "e1", "click": 1},
    {"event_id": "e1", "click": 0},
    {"event_id": "e1", "click": 2},
    {"event_id": "e1", "click": None},
    {"event_id": "e1", "click": "true"},
    {"event_id": "e1", "label": 3},
    {"event_id": "e1", "click": True, "label": 3},
    {"event_id": "e1", "kick": True},
    {"event_id": "e1"},
    ["e1", True],
    17,
]


def _outcome(parse: Any, raw: Any, cls: type) -> Any:
    """``(event_id, {name: (dtype, shape, values)})``, or the error body."""
    try:
        event_id, fields = parse(raw, CONFIG, cls, prefix="events[0]")
    except ApiError as exc:
        return exc.status, exc.body()
    return event_id, {name: (a.dtype.str, a.shape, a.tolist()) for name, a in fields.items()}


@pytest.mark.parametrize(("task", "algorithm"), [  # learners of clicks and of labels
    ("label", "rcnbf"), ("label", "perceptron"), ("label_set", "mc_dbf"), ("label_set", "mc_slp")])
@pytest.mark.parametrize("raw", RAW_EVENTS)
def testquick_click_parser_answers_as_the_full_validation(task: str, algorithm: str,
                                                           raw: Any) -> None:
    spec = TASKS[task]
    assert spec.quick_feedback is quick_click
    cls = learner_class(task, algorithm)
    full = replace(spec, quick_feedback=None)
    assert _outcome(spec.parse_feedback, raw, cls) == _outcome(full.parse_feedback, raw, cls)


def testquick_click_parser_takes_the_common_shape_only() -> None:
    rcnbf, perceptron = learner_class("label", "rcnbf"), learner_class("label", "perceptron")
    taken = [i for i, raw in enumerate(RAW_EVENTS) if quick_click(raw, rcnbf) is not None]
    assert taken == [0, 1, 2]  # the rest go to the full validation
    assert all(quick_click(raw, perceptron) is None for raw in RAW_EVENTS)
    _, fields = quick_click(RAW_EVENTS[0], rcnbf)  # type: ignore[misc]
    with pytest.raises(ValueError):  # shared by every quickly parsed event: read-only
        fields["click"][...] = 0.0
    assert fields["click"].dtype == np.float64
