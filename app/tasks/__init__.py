"""The tasks a model can serve: one module per task, each declaring one
:class:`~app.tasks.base.Task`, and the registry every other table is derived from.

Adding a task is its module (its schemas, feedback parsing and :class:`Task`), its
learners (:data:`app.learners.registry.ALGORITHMS`), one line of :data:`TASKS` and its
tests; ``docs/architecture.md`` ("Adding a task") walks through one.
"""

from __future__ import annotations

from app.learners.base import ParamError
from app.learners.registry import did_you_mean
from app.tasks import label, label_set, noisy_input, noisy_label, rank, regression
from app.tasks.base import OpenPolicy, Replay, Task

__all__ = ["TASKS", "OpenPolicy", "Replay", "Task", "get_task"]

#: Every task, by name, in the order the docs, the replay's tie-break and the API's enum use.
TASKS: dict[str, Task] = {task.name: task for task in (
    label.TASK, label_set.TASK, regression.TASK, noisy_label.TASK, noisy_input.TASK, rank.TASK)}


def get_task(name: str) -> Task:
    """The task called ``name``; :class:`ParamError` naming ``task`` otherwise (a 422 from
    the API)."""
    task = TASKS.get(name)
    if task is None:
        raise ParamError("task", f"unknown task {name!r}{did_you_mean(name, list(TASKS))}; "
                                 f"choose one of {list(TASKS)}")
    return task
