"""The README and docs/ stay true to the code and stand on their own.

Every setting is in the README; the algorithm reference is the generator's
output; every relative link resolves to a file of the repository; docs/ holds
pages and figures only (no raw run output) and never points at files outside
the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import docgen
from app.learners import registry
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: Markdown links and images: ``[text](target)`` / ``![alt](target)``.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_readme_documents_every_setting() -> None:
    missing = [name for name in Settings.model_fields
               if f"NOISYLOOP_{name.upper()}" not in README]
    assert not missing, f"settings not in the README's Configuration table: {missing}"


def test_readme_quick_start_has_the_two_make_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make serve" in quick_start and "make test" in quick_start


def test_algorithm_reference_is_up_to_date() -> None:
    committed = docgen.PAGE.read_text(encoding="utf-8")
    assert committed == docgen.render(), "docs/algorithms.md is stale: run python -m app.docgen"
    assert docgen.main(["--check"]) == 0


def test_algorithm_reference_covers_every_registered_algorithm() -> None:
    page = docgen.render()
    for task, algorithm in registry.ALGORITHMS:
        cls = registry.learner_class(task, algorithm)
        in_task = page.split(f"## Task `{task}`", 1)[1].split("\n## ", 1)[0]
        section = in_task.split(f"### `{algorithm}`", 1)[1].split("\n### ", 1)[0]
        assert f"{cls.__module__}.{cls.__name__}" in section
        assert cls.paper in section
        for name in registry.default_params(cls):
            assert f"| `{name}` |" in section, f"{algorithm}: {name}"


def test_algorithm_reference_refuses_an_undocumented_parameter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cls = registry.learner_class("label", "banditron")
    monkeypatch.setattr(cls, "__doc__", "Banditron without a Parameters section.")
    with pytest.raises(docgen.DocError, match="'gamma' is not described"):
        docgen.render()


def test_readme_learner_table_lists_every_algorithm() -> None:
    table = README.split("## Learners", 1)[1].split("\n\n", 2)[1]
    rows = {line.split("|")[1].strip().strip("`"): line for line in table.splitlines()[2:]}
    for task, algorithm in registry.ALGORITHMS:
        assert f"`{algorithm}`" in rows[task], f"{task}/{algorithm} missing from the README"
