"""Evaluation dispatches on a log's shape, never on its task's name.

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

from app.tasks import TASKS

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
