"""The tree stays lint-clean: ``ruff check`` and ``mypy`` as ``pyproject.toml`` configures them.

Both tools run with no arguments (what to check, which rules and which modules
are strict all come from ``pyproject.toml``), as subprocesses of this
interpreter, from the repository root; the output is the assertion message, so
a failure shows the offending lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=240)


def test_ruff_reports_nothing() -> None:
    result = _run("ruff", "check")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_reports_nothing() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_strict_for_learners_store_and_client() -> None:
    """An untyped function in a strict module is an error (the overrides are in force)."""
    probe = ROOT / "app" / "learners" / "_lint_probe.py"
    probe.write_text("def untyped(x):\n    return x\n")
    try:
        result = _run("mypy", str(probe.relative_to(ROOT)))
    finally:
        probe.unlink()
    assert result.returncode == 1 and "no-untyped-def" in result.stdout, result.stdout
