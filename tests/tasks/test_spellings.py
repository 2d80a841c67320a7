"""Task names are spelled where tasks are declared, not across the tree.

Every task's knowledge lives in its module of :mod:`app.tasks`; the rest of the
tree derives its tables from :data:`app.tasks.TASKS`.  This scan counts the
string literals that spell a task's name in ``app/`` and ``workers/`` outside
the task modules, the learners (a learner declares its task), the simulators
and the API schemas (their docs name the task they serve).  A literal used as
a subscript or a dict key is a field name (``output["label"]``, ``{"label": k}``),
not a task, and is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

from app.tasks import TASKS

ROOT = Path(__file__).resolve().parents[2]
#: Where task names belong.
HOMES = ("app/tasks", "app/learners", "app/sim", "app/api/schemas")
#: The spellings allowed elsewhere (route tags, WebSocket ops, the benchmarks' and the
#: replay runners' own tasks): a new one means a table that should be derived instead.
MOST = 10


def _field_names(tree: ast.AST) -> set[int]:
    """The ids of the string nodes used as a subscript or a dict key."""
    keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            keys.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            keys.update(id(key) for key in node.keys if key is not None)
    return keys


def spellings(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of every literal of ``source`` that spells one of ``names`` as a
    value (not as a field name).

    >>> spellings('t = "label"\\nx = out["label"]\\ny = {"label": 1}\\nz = f(task="rank")',
    ...           {"label", "rank"})
    [(1, 'label'), (4, 'rank')]
    """
    tree = ast.parse(source)
    keys = _field_names(tree)
    return sorted((node.lineno, str(node.value)) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in names
                  and id(node) not in keys)


def spelled() -> list[str]:
    """``path:line name`` of every task-name spelling outside :data:`HOMES`."""
    found = []
    for package in ("app", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(HOMES):
                continue
            found += [f"{relative}:{line} {name}"
                      for line, name in spellings(path.read_text("utf-8"), set(TASKS))]
    return found


def test_task_names_are_spelled_in_few_places() -> None:
    found = spelled()
    assert len(found) <= MOST, "\n".join(found)
