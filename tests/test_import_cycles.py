"""No import cycle anywhere in the project, counting every import statement.

The import graph covers ``app``, ``workers``, ``bench`` and the Python client
(``clients/python/src``).  Each module is parsed with :mod:`ast` (the parser of
:mod:`tests.test_layers`), so an import inside a function or under
``if TYPE_CHECKING:`` is an edge like any other: a cycle through a deferred
import still ties the modules together (neither can be understood, tested or
moved without the other).  The implicit import of a module's parent packages is
not an edge.

A cycle is found through the graph's strongly connected components (Tarjan's
algorithm): every component of more than one module holds a cycle, printed as
``a -> b -> ... -> a`` when the test fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_layers import ROOT, cycle, import_graph, imported

#: Top-level package -> the directory that holds it.
SOURCES = {"app": ROOT, "workers": ROOT, "bench": ROOT,
           "noisyloop_client": ROOT / "clients" / "python" / "src"}

def project_modules() -> dict[str, tuple[Path, list[str]]]:
    """Module name -> (path, what it imports), for every module of :data:`SOURCES`."""
    found = {}
    for package, base in SOURCES.items():
        for path in sorted((base / package).rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = (path, list(imported(path.read_text("utf-8"), name,
                                               path.name == "__init__.py")))
    return found


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that hold a cycle (more than one
    module), each sorted, in the order Tarjan's algorithm closes them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycles(graph: dict[str, set[str]]) -> Iterator[tuple[list[str], list[str]]]:
    """``(component, one cycle through it as [a, b, ..., a])`` for every component of
    ``graph`` that holds a cycle."""
    for members in components(graph):
        inside = set(members)
        yield members, cycle({name: graph[name] & inside for name in members})


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    tree = project_modules()
    return import_graph(tree, tuple(SOURCES))


def test_project_imports_no_cycle(graph: dict[str, set[str]]) -> None:
    for package in SOURCES:
        assert any(name.startswith(package + ".") for name in graph), f"no module of {package}"
    found = [" -> ".join(path) for _members, path in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_cycles_found_through_deferred_and_type_checking_imports() -> None:
    sources = {
        "pkg.a": "from pkg import b\n",
        "pkg.b": "def later():\n    from pkg.c import run\n",
        "pkg.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
        "pkg.d": "import pkg.a\n",
        "pkg.e": "from pkg import f\n",
        "pkg.f": "from . import e\n",
    }
    tree = {name: (Path(name), list(imported(text, name))) for name, text in sources.items()}
    graph = import_graph(tree, ("pkg",))
    assert [(members, " -> ".join(path)) for members, path in cycles(graph)] == [
        (["pkg.a", "pkg.b", "pkg.c"], "pkg.a -> pkg.b -> pkg.c -> pkg.a"),
        (["pkg.e", "pkg.f"], "pkg.e -> pkg.f -> pkg.e")]
