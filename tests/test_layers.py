"""Imports point one way: command line -> server -> API -> store -> learners, and the API ->
tasks -> learners.

A task module (``app/tasks``) declares its schemas and feedback parsing with the neutral
field types, errors and feature helpers (:mod:`app.fields`, :mod:`app.errors`,
:mod:`app.features`), never with the API's; its replay runner is named, not imported, so
the service never imports the replay's plotting.  Checked transitively too: nothing a task
imports, at any depth, is the API, and a worker process (``import workers.worker`` in a
fresh interpreter) loads no web framework.

Every module under ``app/`` and ``workers/`` is parsed (with :mod:`ast`, so an
import inside a function or under ``TYPE_CHECKING`` counts, a name in a
docstring does not), and each :class:`Rule` names what a part of the tree
must not import.  ``docs/architecture.md`` ("Layers") explains the layers.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "workers")


@dataclass(frozen=True)
class Rule:
    """Modules under ``scope`` (but not under ``exempt``) import nothing under ``forbidden``,
    except what is under ``allowed``; each entry is a dotted module prefix."""

    name: str
    scope: tuple[str, ...]
    forbidden: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()


COMMAND_LINE = ("app.cli", "app.commands")

RULES = (
    Rule("only the command line imports the sub-commands", scope=PACKAGES,
         exempt=COMMAND_LINE, forbidden=COMMAND_LINE),
    Rule("only the command line imports the workers", scope=("app",), exempt=COMMAND_LINE,
         forbidden=("workers",)),
    Rule("the learners are pure numpy", scope=("app.learners",),
         forbidden=("app", "workers", "redis", "fastapi", "starlette"),
         allowed=("app.learners",)),
    Rule("off-policy evaluation is pure numpy", scope=("app.evaluation",),
         forbidden=("app", "workers", "redis", "fastapi", "starlette"),
         allowed=("app.evaluation", "app.learners")),
    Rule("the store knows nothing of HTTP", scope=("app.store",),
         forbidden=("fastapi", "starlette", "uvicorn", "app.api", "app.server", "app.main",
                    "workers")),
    Rule("the API knows nothing of how it is served", scope=("app.api",),
         forbidden=("uvicorn", "app.server", "app.main", "workers")),
    Rule("a task declares what the API serves and names its replay runner", scope=("app.tasks",),
         forbidden=("app.api", "app.store", "app.server", "app.main", "app.replay", "workers")),
    Rule("the field types, errors and features know nothing of HTTP",
         scope=("app.fields", "app.errors", "app.features"),
         forbidden=("fastapi", "starlette", "uvicorn", "app.api", "app.server", "app.main",
                    "app.store", "workers")),
    Rule("a simulator knows nothing of the replay that drives it", scope=("app.sim",),
         forbidden=("app.replay",)),
    Rule("the serving runtime is below the app factory", scope=("app.server",),
         forbidden=("app.main", "workers")),
    Rule("the workers know nothing of HTTP", scope=("workers",),
         forbidden=("fastapi", "starlette", "uvicorn", "app.api", "app.server", "app.main")),
)


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` (relative to the repository root)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str, is_package: bool = False) -> Iterator[str]:
    """Every module (or module attribute) that ``source``, the text of ``module``, imports:
    ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a.b`` (relative imports are
    resolved), wherever the statement is."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            yield from (f"{origin}.{alias.name}" for alias in node.names)


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def modules() -> dict[str, tuple[Path, list[str]]]:
    """Module name -> (path, what it imports), for every module of :data:`PACKAGES`."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = module_name(path)
            found[name] = (path, list(imported(path.read_text("utf-8"), name,
                                               path.name == "__init__.py")))
    return found


def violations(rule: Rule, tree: dict[str, tuple[Path, list[str]]]) -> list[str]:
    """``module imports target`` for every import of ``tree`` that breaks ``rule``."""
    return [f"{name} imports {target}"
            for name, (_path, targets) in tree.items()
            if under(name, rule.scope) and not under(name, rule.exempt)
            for target in targets
            if under(target, rule.forbidden) and not under(target, rule.allowed)]


@pytest.fixture(scope="module")
def tree() -> dict[str, tuple[Path, list[str]]]:
    return modules()


@pytest.mark.parametrize("rule", RULES, ids=[rule.name for rule in RULES])
def test_imports_point_one_way(rule: Rule, tree: dict[str, tuple[Path, list[str]]]) -> None:
    assert any(under(name, rule.scope) for name in tree), f"no module under {rule.scope}"
    assert violations(rule, tree) == []


def test_imports_are_found_wherever_they_are_written() -> None:
    source = '''"""Mentions app.commands in a docstring only."""
from typing import TYPE_CHECKING
from . import sibling
from ..store import keys
import workers.worker as w

if TYPE_CHECKING:
    from app.server.options import uvicorn_options

def lazy():
    from app.commands import serve
'''
    assert sorted(imported(source, "app.api.routes.predict")) == [
        "app.api.routes.sibling", "app.api.store.keys", "app.commands.serve",
        "app.server.options.uvicorn_options", "typing.TYPE_CHECKING", "workers.worker"]
    assert "app.api.sibling" in imported("from . import sibling", "app.api", is_package=True)


def test_a_rule_reports_each_import_that_breaks_it() -> None:
    learners = Rule("pure", scope=("app.learners",), forbidden=("app",), allowed=("app.learners",))
    api = next(rule for rule in RULES if rule.scope == ("app.api",))
    fake = {"app.learners.x": (Path("x.py"), ["app.learners.base.Learner", "app.store.keys",
                                              "numpy", "application.y"]),
            "app.api.y": (Path("y.py"), ["app.server.fastpath", "app.serverless", "app.store"])}
    assert violations(learners, fake) == ["app.learners.x imports app.store.keys"]
    assert violations(api, fake) == ["app.api.y imports app.server.fastpath"]


#: Packages whose modules must not import each other in a cycle.
ACYCLIC = ("app.api", "app.tasks")


def import_graph(tree: dict[str, tuple[Path, list[str]]], scope: tuple[str, ...]
                 ) -> dict[str, set[str]]:
    """Module -> the modules under ``scope`` it imports (an imported name resolves to the
    longest module of ``tree`` it starts with), for every module under ``scope``."""
    graph: dict[str, set[str]] = {}
    for name, (_path, targets) in tree.items():
        if not under(name, scope):
            continue
        graph[name] = set()
        for target in targets:
            parts = target.split(".")
            found = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                          if ".".join(parts[:n]) in tree), None)
            if found is not None and found != name and under(found, scope):
                graph[name].add(found)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]`` when there is none
    (depth-first search; an edge back to a module on the current path closes a cycle)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_api_and_tasks_import_no_cycle(tree: dict[str, tuple[Path, list[str]]]) -> None:
    graph = import_graph(tree, ACYCLIC)
    assert "app.tasks.rank" in graph and "app.api.decisions" in graph
    assert " -> ".join(cycle(graph)) == ""


def test_cycle_finds_a_loop_through_three_modules() -> None:
    fake = {"app.api.a": (Path("a.py"), ["app.api.b.f"]),
            "app.api.b": (Path("b.py"), ["app.api.c"]),
            "app.api.c": (Path("c.py"), ["app.api.a.A", "numpy"]),
            "app.api.d": (Path("d.py"), [])}
    graph = import_graph(fake, ACYCLIC)
    assert cycle(graph) == ["app.api.a", "app.api.b", "app.api.c", "app.api.a"]
    assert cycle({**graph, "app.api.c": set()}) == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (``graph`` from
    :func:`import_graph`)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_tasks_import_no_api_module_at_any_depth(tree: dict[str, tuple[Path, list[str]]]
                                                 ) -> None:
    graph = import_graph(tree, PACKAGES)
    tasks = [name for name in graph if under(name, ("app.tasks",))]
    assert "app.tasks.rank" in tasks
    reached = {name: sorted(m for m in reachable(graph, name) if under(m, ("app.api",)))
               for name in tasks}
    assert {name: api for name, api in reached.items() if api} == {}


def test_reachable_follows_imports_through_other_modules() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": set(), "d": {"a"}}
    assert reachable(graph, "a") == {"a", "b", "c"}
    assert reachable(graph, "c") == set()


#: Web frameworks a worker process must not load.
WEB_FRAMEWORKS = ("fastapi", "starlette", "uvicorn")


def loaded_after_import(module: str) -> list[str]:
    """The modules a fresh interpreter holds after ``import module`` (this tree first on
    its path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    script = f"import sys, {module}; print(chr(10).join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return out.split()


def test_a_worker_process_loads_no_web_framework() -> None:
    loaded = loaded_after_import("workers.worker")
    assert "workers.worker" in loaded and "app.tasks" in loaded
    assert [m for m in loaded if under(m, (*WEB_FRAMEWORKS, "app.api"))] == []


def test_the_web_framework_check_sees_a_web_framework() -> None:
    loaded = loaded_after_import("app.main")
    assert "fastapi" in loaded and "starlette" in loaded
