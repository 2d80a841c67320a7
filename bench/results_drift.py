"""A world that changes: each ridge learner with and without forgetting, through the replays.

For each learner (``label``: the ridge bandits on ``digits``; ``rank``:
``ridge_pl`` on the simulator) and each ``half_life`` (null: never forget),
the same seeds replay

* ``stationary``: 30,000 rounds of one world; the share of the
  random-to-oracle gap closed over the last 5,000 (the cost of forgetting);
* ``abrupt``: the world changes after 20,000 rounds; the share closed over
  rounds 2,500-7,500 after the change, beside a ``fresh`` model's over its
  own rounds 2,500-7,500 of the new world (their ratio is the recovery);
* ``gradual`` and ``churn``: the share closed over the last 5,000 of 30,000
  rounds after a ramp (or replacements every 2,500 rounds) from round 10,000;

with the delay of the first detection of the service's Page-Hinkley detector
after the change and the false alarms (detections before the change and on
the stationary stream), per million events.  Learners decide one round at a
time and learn in batches of 100 (a trainer's delayed feedback).

Usage::

    .venv/bin/python bench/results_drift.py --seeds 2        # the docs table

Writes ``bench/results/drift/drift.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from app.replay import label, rank

LABEL = (("linucb_diag", (None, 700.0)), ("squarecb_diag", (None, 300.0)),
         ("lints_diag", (None, 800.0)))
RANK = (("ridge_pl", (None, 3000.0)),)


def _args(task: str, algorithm: str, rounds: int, half_life: float | None, drift: str,
          change_at: int, span: int) -> argparse.Namespace:
    common = {"task": task, "algorithm": algorithm, "rounds": rounds,
              "params": {"half_life": half_life}, "drift": drift, "change_at": change_at,
              "drift_span": span, "no_normalise": False}
    if task == "label":
        return argparse.Namespace(**common, dataset="digits", rho0=0.0, rho1=0.0, gamma=None,
                                  m=None, n_s=None, nrest_percentile=None, feedback_delay=100)
    return argparse.Namespace(**common, dataset="sim", candidates=20, slots=3,
                              position_bias=rank.DEFAULT_THETA, click_noise=rank.DEFAULT_RHO,
                              churn=0.1, churn_every=1000, context_features=8,
                              action_features=8, learn_batch=100)


def scenario(task: str, algorithm: str, half_life: float | None, seed: int) -> dict[str, Any]:
    """The five runs of one learner, half-life and seed (module docstring)."""
    runner = label if task == "label" else rank

    def extra(drift: str, change_at: int, rounds: int, span: int = 10_000) -> dict[str, Any]:
        args = _args(task, algorithm, rounds, half_life, drift, change_at, span)
        return runner.run(args, seed, lambda n: None).extra

    stationary = extra("abrupt", 10**9, 30_000)
    abrupt = extra("abrupt", 20_000, 27_500)
    fresh = extra("abrupt", 0, 7_500)
    gradual = extra("gradual", 10_000, 30_000)
    churn = extra("churn", 10_000, 30_000, span=2_500)
    return {
        "task": task, "algorithm": algorithm, "half_life": half_life, "seed": seed,
        "stationary_tail": stationary["gap_closed_tail"],
        "stationary_false_alarms": stationary["false_alarms"],
        "abrupt_after_change": abrupt["gap_closed_after_change"],
        "fresh": fresh["gap_closed_after_change"],
        "abrupt_detection_delay": abrupt["detection_delay"],
        "abrupt_false_alarms": abrupt["false_alarms"],
        "gradual_tail": gradual["gap_closed_tail"],
        "gradual_detection_delay": gradual["detection_delay"],
        "churn_tail": churn["gap_closed_tail"],
        "churn_detection_delay": churn["detection_delay"],
    }


def table(records: list[dict[str, Any]]) -> str:
    """Markdown: means over seeds per learner and half-life."""
    lines = ["| learner | half_life | stationary, last 5,000 | abrupt, 2,500-7,500 after | "
             "fresh, 2,500-7,500 | recovery | gradual, last 5,000 | churn, last 5,000 | "
             "detection delay (abrupt) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    keys = dict.fromkeys((r["algorithm"], r["half_life"]) for r in records)
    for algorithm, half_life in keys:
        rows = [r for r in records if (r["algorithm"], r["half_life"]) == (algorithm, half_life)]

        def mean(name: str, rows: list[dict[str, Any]] = rows) -> float:
            return float(np.mean([r[name] for r in rows]))

        delays = [r["abrupt_detection_delay"] for r in rows]
        delay = "none" if None in delays else f"{np.mean(delays):,.0f}"
        lines.append(
            f"| {algorithm} | {'never' if half_life is None else f'{half_life:,.0f}'} | "
            f"{mean('stationary_tail'):.3f} | {mean('abrupt_after_change'):.3f} | "
            f"{mean('fresh'):.3f} | {mean('abrupt_after_change') / mean('fresh'):.2f} | "
            f"{mean('gradual_tail'):.3f} | {mean('churn_tail'):.3f} | {delay} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", default="bench/results/drift/drift.json")
    parser.add_argument("--tasks", default="label,rank")
    args = parser.parse_args()
    records = []
    for task, learners in (("label", LABEL), ("rank", RANK)):
        if task not in args.tasks.split(","):
            continue
        for algorithm, half_lives in learners:
            for half_life in half_lives:
                for seed in range(args.seeds):
                    records.append(scenario(task, algorithm, half_life, seed))
                    print(json.dumps(records[-1]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(records, indent=1) + "\n")
    print(table(records))


if __name__ == "__main__":
    main()
