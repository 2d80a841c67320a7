"""The README and docs/ stay true to the code and stand on their own.

Every setting (the API's and the workers') is in the README; the algorithm
reference is the generator's output; every relative link resolves to a file
of the repository, and its ``#anchor`` to a heading of the page it names;
docs/ holds pages and figures only (no raw run output) within a size budget
(as ``du -sk docs`` counts it) and never points at files outside the repository.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from app import docgen
from app.learners import registry
from app.settings import Settings
from app.worker_settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: Markdown links and images: ``[text](target)`` / ``![alt](target)``.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_readme_documents_every_setting() -> None:
    missing = [name for name in Settings.model_fields
               if f"NOISYLOOP_{name.upper()}" not in README]
    assert not missing, f"settings not in the README's Configuration table: {missing}"


def test_readme_documents_every_worker_setting_with_its_flag() -> None:
    missing = [name for name in WorkerSettings.model_fields
               if f"| `{WorkerSettings.env_var(name)}` | `--{name.replace('_', '-')}` |"
               not in README]
    assert not missing, f"worker settings not in the README's worker table: {missing}"


def test_readme_quick_start_has_the_two_make_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make serve" in quick_start and "make test" in quick_start


def test_readme_commands_write_their_files_into_an_ignored_directory() -> None:
    """A command copied from the README leaves no untracked file in a clone's root."""
    ignored = [line.strip("/") + "/" for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.startswith("/") and line.endswith("/")]
    written = re.findall(r"--(?:json|plot|output|out)[ =](\S+)", README)
    assert written, "the README's replay example writes a JSON file and a plot"
    stray = [path for path in written if not path.startswith(tuple(ignored))]
    assert not stray, f"README commands write outside {ignored}: {stray}"


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


def _without_code(text: str) -> str:
    """Markdown text without fenced code blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.DOTALL))


def _links(page: Path) -> list[str]:
    """The relative link targets of a Markdown page (``#anchor`` alone included),
    outside code blocks and spans."""
    return [target for target in LINK.findall(_without_code(page.read_text()))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lower-cased, without Markdown marks and
    punctuation other than ``-`` and ``_``, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings; a repeated one gets ``-1``, ``-2``, ... as on GitHub."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.MULTILINE):
        slug = _slug(heading)
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _broken(page: Path) -> list[str]:
    """Relative links of ``page`` to no file of the repository, or to no heading of a page."""
    broken = []
    for target in _links(page):
        name, _, anchor = target.partition("#")
        path = (page.parent / name).resolve() if name else page
        missing = not path.exists() or not path.is_relative_to(ROOT)
        if missing or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading_in_the_repository(
        page: Path) -> None:
    broken = _broken(page)
    assert not broken, f"{page.relative_to(ROOT)}: links that resolve to nothing: {broken}"


def test_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#x) `[code](nope.md)` [web](https://x.org)")
    assert _links(page) == ["page.md", "missing.md#x"]


def test_link_check_sees_a_missing_anchor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "other.md").write_text(
        "# Current figures (27 runs)\n## `api --workers` and *p99*\n## Notes\n## Notes\n"
        "```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("## Top\n[a](#top) [b](other.md#current-figures-27-runs) "
                    "[c](other.md#api---workers-and-p99) [d](other.md#notes-1) "
                    "[e](other.md#gone) [f](#missing) [g](other.md#not-a-heading)")
    assert _broken(page) == ["other.md#gone", "#missing", "other.md#not-a-heading"]


#: Size budget of docs/ in KiB, measured as ``du -sk docs`` measures it: room for a page per
#: task and integration (the rank, Personalizer and continuous-action pages) with their figures,
#: not for raw outputs or lab notes (those go to bench/results/ and the commits).
DOCS_BUDGET_KB = 656
#: The block ``du`` counts a file in on the usual filesystems (ext4, xfs, APFS, NTFS).
BLOCK = 4096


def _disk_bytes(path: Path) -> int:
    """Bytes a file or directory takes on disk: its allocated blocks where the OS
    reports them, and never less than its size in whole 4 KiB blocks, so that a
    filesystem that compresses or inlines small files does not hide what ``du``
    counts on ext4."""
    st = path.stat()
    rounded = -(-st.st_size // BLOCK) * BLOCK
    return max(getattr(st, "st_blocks", 0) * 512, rounded)


def _du_kb(root: Path) -> float:
    """KiB that ``root`` and everything under it take, as ``du -sk root`` adds them up."""
    return sum(_disk_bytes(p) for p in [root, *root.rglob("*")]) / 1024


def test_size_measure_counts_whole_blocks_of_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "one byte").write_bytes(b"x")
    (tmp_path / "a block and a byte").write_bytes(b"x" * (BLOCK + 1))
    assert _du_kb(tmp_path) == (BLOCK + BLOCK + 2 * BLOCK) / 1024


def test_docs_hold_pages_and_figures_only_and_stay_small() -> None:
    docs = ROOT / "docs"
    files = [p for p in docs.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix == ".json"], "raw outputs belong in bench/results/"
    assert {p.suffix for p in files} <= {".md", ".png", ".svg"}
    size = _du_kb(docs)
    largest = sorted(files, key=_disk_bytes, reverse=True)[:5]
    assert size <= DOCS_BUDGET_KB, (
        f"docs/ takes {size:.0f} KiB (budget {DOCS_BUDGET_KB}); largest: "
        + ", ".join(f"{p.relative_to(ROOT)} {_disk_bytes(p) // 1024} KiB" for p in largest))


def test_docs_never_point_outside_the_repository() -> None:
    for page in PAGES:
        text = page.read_text()
        assert "shared/spec" not in text and "../shared" not in text, page.relative_to(ROOT)


#: A citation of a document outside the repository: a numbered section of the working
#: specification, or a path into the shared folder beside the checkout.
OUTSIDE = re.compile(r"\b[Ss]pec \d+(\.\d+)*\b|\b[Tt]he spec\b|\.\./shared|shared/(spec|papers)")


def test_code_cites_papers_and_docs_never_a_document_outside_the_repository() -> None:
    sources = [path for folder in ("app", "workers", "tests", "bench", "clients")
               for path in sorted((ROOT / folder).rglob("*.py"))
               if path != Path(__file__).resolve()]  # this file spells the rule out
    assert len(sources) > 100
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in sources
             for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if OUTSIDE.search(line)]
    assert found == [], "cite the paper's section or the docs page instead:\n" + "\n".join(found)


def test_outside_citations_are_recognised() -> None:
    assert [bool(OUTSIDE.search(text)) for text in (
        "NREst (spec 1.5)", "Spec 5.10.7: naive", "The spec marks this rule",
        "see ../shared/papers", "P1 Algorithm 3", "the OpenAPI spec's paths", "spectral")] == [
        True, True, True, True, False, False, False]


#: The longest entry line of CHANGELOG.md: a reader deciding whether to upgrade reads one
#: short line per change (the details live in the docs and the commits).
CHANGELOG_LINE = 120


def test_changelog_has_one_short_line_per_change() -> None:
    """Under the version headings every line is a heading, blank, or one ``- `` entry of at
    most :data:`CHANGELOG_LINE` characters: no wrapped entries (``merge=union`` in
    ``.gitattributes`` then merges two branches' entries line by line)."""
    lines = (ROOT / "CHANGELOG.md").read_text().splitlines()
    first = next(n for n, line in enumerate(lines) if line.startswith("## "))
    entries = [line for line in lines[first:] if line.startswith("- ")]
    assert len(entries) > 50
    bad = [f"line {n}: {line[:70]}" for n, line in enumerate(lines[first:], first + 1)
           if line and not line.startswith(("## ", "### "))
           and not (line.startswith("- ") and len(line) <= CHANGELOG_LINE)]
    assert bad == [], (f"one line of at most {CHANGELOG_LINE} characters per change:\n"
                       + "\n".join(bad))
    assert "CHANGELOG.md merge=union" in (ROOT / ".gitattributes").read_text()
