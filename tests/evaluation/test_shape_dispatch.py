"""Evaluation dispatches on a log's shape, never on its task's name.

An exported log whose task is not known finds its shape through the registry
(:func:`app.tasks.log_shape_of`: the first task whose shape reads its first event line).

A task declares how its decision log is evaluated (:attr:`app.tasks.base.Task.log_shape`,
:mod:`app.evaluation.shapes`); the evaluation code and the workers read that declaration.
Every module under :data:`SCOPE` but :data:`EXEMPT` (the shapes' own module) is parsed with
:mod:`ast`: a string constant that is a task's name (a comparison such as
``config["task"] == "rank"``, or a task passed by name as ``check_config(c, "label", ...)``)
is a dispatch on a task's name.  Docstrings do not count, nor a constant used as a
subscript (``decision.output["label"]`` reads a decision's field, not a task).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.evaluation.shapes import LABEL_SHAPE, RANK_SHAPE
from app.tasks import TASKS, log_shape_of
from tests.tasks import thumbs

ROOT = Path(__file__).resolve().parents[2]
#: Where evaluation is dispatched.
SCOPE = ("app/evaluation", "workers")
#: The modules that may name a task: the log shapes themselves.
EXEMPT = ("app/evaluation/shapes.py",)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree``'s module, classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def task_names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each string constant of ``source`` that is one of ``names``
    (docstrings and subscripts left out: module docstring)."""
    tree = ast.parse(source)
    skipped = docstrings(tree)
    skipped |= {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in names and id(node) not in skipped)


def test_evaluation_and_workers_name_no_task() -> None:
    names = set(TASKS)
    assert {"label", "rank"} <= names
    paths = [path for folder in SCOPE for path in sorted((ROOT / folder).rglob("*.py"))
             if str(path.relative_to(ROOT)) not in EXEMPT]
    assert len(paths) > 20, "the scope holds the evaluation and worker modules"
    named = [f"{path.relative_to(ROOT)}:{line}: {name!r}" for path in paths
             for line, name in task_names_in(path.read_text("utf-8"), names)]
    assert named == []


def test_a_task_name_is_found_wherever_it_is_compared_or_passed() -> None:
    source = '''"""A docstring naming "rank" and label."""
def f(config, decision):
    """Another: 'label'."""
    if config["task"] == "rank":
        return check(config, "label")
    return decision.output["label"], {"task": "label_set"}["task"]
'''
    assert task_names_in(source, {"label", "rank", "label_set"}) == [
        (4, "rank"), (5, "label"), (6, "label_set")]


def test_an_exported_line_finds_its_shape_through_the_registry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TASKS, thumbs.NAME, thumbs.TASK)
    label = {"type": "event", "features": [1.0], "action": 0, "propensity": 0.5,
             "feedback": {"click": 1.0}}
    rank = {"type": "event", "features": [1.0], "slots": [{"slot": 0, "propensity": 1.0}]}
    thumb = {"type": "event", "features": [1.0], "action": 1, "propensity": 0.5,
             "feedback": {"up": 1.0}}
    found = [log_shape_of(line) for line in (label, rank, thumb, {"features": [1.0]})]
    assert found == [LABEL_SHAPE, RANK_SHAPE, thumbs.TASK.log_shape, None]
