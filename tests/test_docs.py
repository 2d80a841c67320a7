"""The README stays true to the code: every setting is documented there."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_documents_every_setting() -> None:
    missing = [name for name in Settings.model_fields
               if f"NOISYLOOP_{name.upper()}" not in README]
    assert not missing, f"settings not in the README's Configuration table: {missing}"


def test_readme_quick_start_has_the_two_make_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make serve" in quick_start and "make test" in quick_start
