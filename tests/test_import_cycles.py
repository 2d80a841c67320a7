"""No import cycle among the workers' modules, counting every import: under
``TYPE_CHECKING``, inside a function, or at the top.

The graph is built with :mod:`ast` (:func:`tests.test_layers.modules`), so an
import that a type-checking guard or a function body keeps from running still
counts: it ties the two modules together all the same.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import cycle, import_graph, imported, modules

#: Packages whose modules must not import each other in a cycle.
ACYCLIC = ("workers",)


def test_workers_import_no_cycle() -> None:
    graph = import_graph(modules(), ACYCLIC)
    assert {"workers.context", "workers.hooks", "workers.jobs"} <= set(graph)
    assert "workers.context" in graph["workers.trainer"]  # the workers' own imports count
    assert " -> ".join(cycle(graph)) == ""


def test_a_cycle_through_guarded_and_late_imports_is_found() -> None:
    context = '''from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from workers.feature import Published
'''
    feature = '''def state():
    from workers.context import ModelSlot
'''
    fake = {"workers.context": (Path("context.py"), list(imported(context, "workers.context"))),
            "workers.feature": (Path("feature.py"), list(imported(feature, "workers.feature")))}
    assert cycle(import_graph(fake, ACYCLIC)) == [
        "workers.context", "workers.feature", "workers.context"]
