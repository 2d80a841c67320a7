"""The tasks a model can serve: one module per task, each declaring one
:class:`~app.tasks.base.Task`, and the registry every other table is derived from.

Adding a task is its module (its schemas, feedback parsing and :class:`Task`), its
learners (:data:`app.learners.registry.ALGORITHMS`, or the task's own ``algorithms``), one
line of :data:`TASKS` (or one :func:`register_task` call) and its tests;
``docs/architecture.md`` ("Adding a task") walks through one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

from pydantic import BaseModel

from app.evaluation.shapes import LogShape
from app.learners.base import ParamError
from app.learners.registry import did_you_mean, register_algorithm
from app.tasks import continuous, label, label_set, noisy_input, noisy_label, rank, regression
from app.tasks.base import OpenPolicy, Replay, Task

__all__ = ["TASKS", "OpenPolicy", "Replay", "Task", "feedback_union", "get_task",
           "log_shape_of", "prediction_union", "register_task"]

#: Every task, by name, in the order the docs, the replay's tie-break, the API's enum and
#: the learners' registry use (filled by :func:`register_task`, below).
TASKS: dict[str, Task] = {}


def register_task(task: Task) -> None:
    """Add ``task`` after the registered ones, with the algorithms it declares
    (:func:`app.learners.registry.register_algorithm`).

    Raises ValueError for a name already registered.
    """
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r} is already registered")
    for algorithm, target in task.algorithms:
        register_algorithm(task.name, algorithm, target)
    TASKS[task.name] = task


for _task in (label.TASK, label_set.TASK, regression.TASK, noisy_label.TASK, noisy_input.TASK,
              rank.TASK):
    register_task(_task)
register_task(continuous.TASK)


def get_task(name: str) -> Task:
    """The task called ``name``; :class:`ParamError` naming ``task`` otherwise (a 422 from
    the API)."""
    task = TASKS.get(name)
    if task is None:
        raise ParamError("task", f"unknown task {name!r}{did_you_mean(name, list(TASKS))}; "
                                 f"choose one of {list(TASKS)}")
    return task


def log_shape_of(line: Mapping[str, Any]) -> LogShape | None:
    """The log shape of the first task (registry order) whose shape reads ``line``, an
    event line of an exported decision log whose task is not known; None when none does."""
    return next((task.log_shape for task in TASKS.values()
                 if task.log_shape is not None and task.log_shape.reads(line)), None)


def _union(models: list[type[BaseModel]]) -> Any:
    """The union of ``models`` (each once, in order), for a schema's annotation."""
    unique = tuple(dict.fromkeys(models))
    return unique[0] if len(unique) == 1 else Union[unique]  # noqa: UP007 (built at run time)


def feedback_union() -> Any:
    """Every registered task's feedback model, as one union (registry order)."""
    return _union([task.feedback_model for task in TASKS.values()])


def prediction_union() -> Any:
    """The decision of every registered task answered by ``POST .../predict`` (all but the
    tasks ranking candidates), as one union (registry order)."""
    return _union([task.prediction_model for task in TASKS.values() if not task.candidates])
