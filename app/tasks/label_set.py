"""The ``label_set`` task: an ordered set of ``m`` labels; feedback: whether the right label
was in it (a click), or the label.  Its feedback is the ``label`` task's."""

from __future__ import annotations

from app.tasks.base import Replay, Task
from app.tasks.label import LabelFeedback, LabelSetPrediction, label_feedback, quick_click

TASK = Task(
    "label_set", "an ordered set of `m` labels; feedback: whether the right label was in it",
    LabelFeedback, LabelSetPrediction, label_feedback, has_clicks=True, needs_classes=True,
    quick_feedback=quick_click, replay=Replay("app.replay.label", service=True))
