"""Evaluation dispatches on a log's shape, never on its task's name.

An exported log whose task is not known finds its shape through the registry
(:func:`app.tasks.log_shape_of`: the first task whose shape reads its first event line).

A task declares how its decision log is evaluated (:attr:`app.tasks.base.Task.log_shape`,
:mod:`app.evaluation.shapes`); the evaluation code and the workers read that declaration.
Every module under :data:`SCOPE` but :data:`EXEMPT` (the shapes' own module) is parsed with
:mod:`ast`: a string constant that is a task's name (a comparison such as
``config["task"] == "rank"``, or a task passed by name as ``check_config(c, "label", ...)``)
is a dispatch on a task's name.  Docstrings do not count, nor a constant used as a
subscript (``decision.output["label"]`` reads a decision's field, not a task).  A comparison
with a shape itself (``shape is RANK_SHAPE``) is a dispatch on the shape: the shape's own
methods, or the command module it names (``LogShape.command``), hold what differs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.evaluation.shapes import LABEL_SHAPE, RANK_SHAPE
from app.tasks import TASKS, log_shape_of
from tests.tasks import thumbs

ROOT = Path(__file__).resolve().parents[2]
#: Where evaluation is dispatched (folders, and the ``noisyloop evaluate`` command).
SCOPE = ("app/evaluation", "workers", "app/commands/evaluate.py")
#: The shapes of the project, by the names they are defined as.
SHAPES = ("LABEL_SHAPE", "RANK_SHAPE")
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


def scoped() -> list[Path]:
    """The modules of :data:`SCOPE` but :data:`EXEMPT`."""
    found = []
    for entry in SCOPE:
        root = ROOT / entry
        found += [root] if root.is_file() else sorted(root.rglob("*.py"))
    return [path for path in found if str(path.relative_to(ROOT)) not in EXEMPT]


def shape_comparisons_in(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each comparison of ``source`` with one of :data:`SHAPES` (a
    name or an attribute, ``shape is RANK_SHAPE``, ``shapes.LABEL_SHAPE == s``)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                name = (side.id if isinstance(side, ast.Name)
                        else side.attr if isinstance(side, ast.Attribute) else None)
                if name in SHAPES:
                    found.add((node.lineno, name))
    return sorted(found)


def test_evaluation_workers_and_the_command_name_no_task() -> None:
    names = set(TASKS)
    assert {"label", "rank"} <= names
    paths = scoped()
    assert len(paths) > 20, "the scope holds the evaluation and worker modules"
    assert ROOT / "app/commands/evaluate.py" in paths
    named = [f"{path.relative_to(ROOT)}:{line}: {name!r}" for path in paths
             for line, name in task_names_in(path.read_text("utf-8"), names)]
    assert named == []


def test_evaluation_workers_and_the_command_compare_no_shape() -> None:
    compared = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in scoped()
                for line, name in shape_comparisons_in(path.read_text("utf-8"))]
    assert compared == []


def test_a_shape_comparison_is_found_either_way_round() -> None:
    source = '''"""RANK_SHAPE in a docstring."""
def f(shape, shapes):
    if shape is RANK_SHAPE:
        return shapes.LABEL_SHAPE == shape
    return shape is not None, RANK_SHAPE.policies
'''
    assert shape_comparisons_in(source) == [(3, "RANK_SHAPE"), (4, "LABEL_SHAPE")]


def test_each_shape_names_a_command_module_that_evaluates_its_exports() -> None:
    import importlib

    for shape in (LABEL_SHAPE, RANK_SHAPE):
        assert shape.command is not None
        assert callable(importlib.import_module(shape.command).run_export)
    assert thumbs.TASK.log_shape is not None and thumbs.TASK.log_shape.command is None


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
