"""Writing a benchmark's raw results (the JSON files under ``bench/results/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(path: str | Path, results: Any) -> None:
    """``results`` as indented JSON at ``path`` (its folders made)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
