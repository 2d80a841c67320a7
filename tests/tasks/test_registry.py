"""The task registry: each task's module declares it, and what it declares holds for its
learners (the tables other modules kept are derived from it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.learners import registry
from app.learners.base import ParamError
from app.tasks import TASKS, get_task

TASK_DIR = Path(__file__).resolve().parents[2] / "app" / "tasks"


def test_every_task_has_its_module_and_every_module_its_task() -> None:
    modules = {p.stem for p in TASK_DIR.glob("*.py")} - {"__init__", "base"}
    assert modules == set(TASKS)
    assert all(name == task.name for name, task in TASKS.items())


def test_the_learners_registry_lists_the_tasks_in_the_order_of_tasks() -> None:
    # one task list: the docs, the API's enum and the algorithms' order all follow TASKS
    assert list(dict.fromkeys(task for task, _ in registry.ALGORITHMS)) == list(TASKS)


def test_every_learner_serves_a_registered_task() -> None:
    declared = {(task, algorithm): registry.learner_class(task, algorithm).task
                for task, algorithm in registry.ALGORITHMS}
    assert {key: task for key, task in declared.items() if task != key[0]} == {}


@pytest.mark.parametrize("name", list(TASKS))
def test_task_declarations_hold_for_its_learners(name: str) -> None:
    task = get_task(name)
    for algorithm in registry.algorithms(name):
        cls = registry.learner_class(name, algorithm)
        assert registry.takes_classes(cls) == task.needs_classes, algorithm
        assert cls.ranks_candidates == task.candidates, algorithm


def test_get_task_names_the_field_of_an_unknown_task() -> None:
    with pytest.raises(ParamError, match="did you mean 'label'") as refused:
        get_task("lable")
    assert refused.value.field == "task"


def test_an_algorithm_is_registered_once_to_one_class() -> None:
    key, target = ("label", "linucb_diag"), registry.ALGORITHMS[("label", "linucb_diag")]
    registry.register_algorithm(*key, target)  # the same class again: nothing changes
    assert list(registry.ALGORITHMS).count(key) == 1 and registry.ALGORITHMS[key] == target
    with pytest.raises(ValueError, match="already"):
        registry.register_algorithm(*key, "app.learners.linucb:LinUCB")
    assert registry.ALGORITHMS[key] == target
