"""The coverage table of a ``config:`` policy on continuous logs in ``docs/continuous.md``.

Runs :func:`tests.evaluation.test_config_continuous.coverage` (20 logs of 10,000
pricing-world customers; a ``ridge_ucb`` configuration trained on each log's first half,
scored on the second; the slow test's own loop), prints the table and writes
``bench/results/config_continuous_coverage.json``.

Usage::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/results_config_continuous.py
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.evaluation.test_config_continuous import coverage

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    run = coverage()
    (RESULTS / "config_continuous_coverage.json").write_text(json.dumps(run, indent=1))
    held, width = run["covered"], run["widths"]
    print("| configuration (20 logs of 10,000, trained on 5,000) | IPS held | SNIPS held | "
          "DR held | mean width IPS / SNIPS / DR | least ESS |\n"
          "| --- | --- | --- | --- | --- | --- |")
    print(f"| `{json.dumps(run['config'])}` | {held['ips']} | {held['snips']} | {held['dr']} | "
          f"{width['ips']:.3f} / {width['snips']:.3f} / {width['dr']:.3f} | "
          f"{run['least_ess']:.0f} |")


if __name__ == "__main__":
    main()
