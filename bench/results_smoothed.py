"""The coverage table of smoothed IPS, SNIPS and DR in ``docs/continuous.md``.

Runs :func:`tests.evaluation.test_smoothed.coverage` (20 logs of 10,000 pricing-world
customers per policy; the slow test's own loop) for ``fixed:2.5`` and a learned
``ridge_ucb`` policy, prints the table and writes ``bench/results/smoothed_coverage.json``.

Usage::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/results_smoothed.py
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.evaluation.test_smoothed import coverage

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    runs = [coverage(policy) for policy in ("fixed:2.5", "model")]
    (RESULTS / "smoothed_coverage.json").write_text(json.dumps(runs, indent=1))
    print("| policy (20 logs of 10,000) | IPS held | SNIPS held | DR held | "
          "mean width IPS / SNIPS / DR |\n| --- | --- | --- | --- | --- |")
    for run in runs:
        held, width = run["covered"], run["widths"]
        print(f"| {run['policy']} | {held['ips']} | {held['snips']} | {held['dr']} | "
              f"{width['ips']:.3f} / {width['snips']:.3f} / {width['dr']:.3f} |")


if __name__ == "__main__":
    main()
