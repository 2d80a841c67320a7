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


def _links(page: Path) -> list[str]:
    """The relative link targets of a Markdown page, outside code blocks and spans."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_in_the_repository(page: Path) -> None:
    broken = []
    for target in _links(page):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(ROOT):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links that resolve to nothing: {broken}"


def test_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#x) `[code](nope.md)` [web](https://x.org)")
    assert _links(page) == ["page.md", "missing.md#x"]


#: Size budgets of docs/: the pages, and the figures the results pages show
#: (64-colour palette PNGs from ``app.replay.output.save_figure``).
PAGES_BUDGET_KB, FIGURES_BUDGET_KB = 250, 450


def test_docs_hold_pages_and_figures_only_and_stay_small() -> None:
    files = [p for p in (ROOT / "docs").rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".json"], "raw outputs belong in bench/results/"
    assert {p.suffix for p in files} <= {".md", ".png", ".svg"}
    pages = sum(p.stat().st_size for p in files if p.suffix == ".md") / 1024
    figures = sum(p.stat().st_size for p in files if p.suffix != ".md") / 1024
    assert pages < PAGES_BUDGET_KB, f"docs/ pages are {pages:.0f} KB"
    assert figures < FIGURES_BUDGET_KB, f"docs/ figures are {figures:.0f} KB"


def test_docs_never_point_outside_the_repository() -> None:
    for page in PAGES:
        text = page.read_text()
        assert "shared/spec" not in text and "../shared" not in text, page.relative_to(ROOT)
