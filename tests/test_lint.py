"""The tree stays lint-clean: ruff over everything, mypy --strict where STYLE asks for it.

Both tools run as subprocesses of this interpreter (they are dev dependencies),
from the repository root so they read ``pyproject.toml``; the output is the
assertion message, so a failure shows the offending lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=240)


def test_ruff_reports_nothing() -> None:
    result = _run("ruff", "check", "app", "workers", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_reports_nothing_in_learners_and_store() -> None:
    result = _run("mypy", "--strict", "app/learners", "app/store")
    assert result.returncode == 0, result.stdout + result.stderr
