"""Unbiasedness of the off-policy estimators at the acceptance scale, against exact truths.

The simulated worlds of :mod:`app.evaluation.simulate` (the ones
``tests/evaluation`` uses at 4,000-5,000 events) at 50,000 events per log
and 40 seeds:

* **label**: uniform and softmax (model-based) logging; targets uniform,
  fixed action 2, ``learned`` (softmax of three times the click logits) and
  the logging policy; IPS, SNIPS and DR (:func:`app.evaluation.estimators.evaluate`);
* **rank** (cascade slates, 5 items, 3 slots): uniform and Plackett-Luce
  (model-based) logging; targets ``pl`` (items in proportion to the cube of
  their attraction), ``pl_soft`` (in proportion to their attraction), uniform
  and the logging policy; RIPS and SNRIPS
  (:func:`app.evaluation.slates.evaluate_slates`) and per-slot independent
  IPS with the exact item-at-slot marginals (``iips``: valid only where a
  slot's click ignores the items above it, so its exact expectation,
  :func:`app.evaluation.simulate.independent_ips_expectation`, is its
  predicted value).  The slate module has no doubly robust estimator.

Each log is evaluated without noise (``clean``) and, with click noise
``(rho0, rho1) = (0.1, 0.3)``, with the correction ``h(f)`` (``corrected``)
and without (``uncorrected``).  The predicted value of an estimate is the
truth ``V`` (``clean``, ``corrected``), ``rho0 + beta V`` per slot summed,
i.e. ``rho0 + beta V`` for label and ``SLOTS rho0 + beta V`` for slates
(``uncorrected``, ``beta = 1 - rho0 - rho1``); ``iips`` has its own
expectation in place of ``V``.  Per cell: coverage of the truth and of the
predicted value by the 95% interval, the mean bias against the truth, its
standard error over the seeds and the predicted bias.

Intervals: the product's percentile bootstrap with ``--n-boot`` resamples
(500 by default, the CLI's default being 200); ``iips``, a mean of per-slate
terms, a normal interval.

Usage::

    nice .venv/bin/python bench/results_evaluation.py            # about 10 CPU minutes
    nice .venv/bin/python bench/results_evaluation.py --quick    # smoke, seconds
    .venv/bin/python bench/results_evaluation.py --render-only
    nice .venv/bin/python bench/results_evaluation.py --seeds 400 \
        --cells softmax/fixed,uniform/learned                      # about 17 CPU minutes

Writes ``bench/results/evaluation.json`` and prints Markdown tables.  With
``--cells``, only the clean label cells named, over more seeds, with the
binomial standard error of each coverage
(``bench/results/evaluation-cells.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.bench.machine import machine_info
from app.evaluation.estimators import ESTIMATORS, LabelLog, corrected_rewards, evaluate
from app.evaluation.policies import logging_policy
from app.evaluation.simulate import (
    ATTRACT,
    LABEL_LOGGING,
    LEARNED,
    N_CONTEXTS,
    PL_LOGGING_SCORES,
    PL_TARGET_SCORES,
    SLOTS,
    UNIFORM_SCORES,
    K,
    cascade_probabilities,
    independent_ips_expectation,
    independent_weights,
    label_value,
    simulate_label,
    simulate_slates,
    slate_value,
)
from app.evaluation.slates import SLATE_ESTIMATORS, evaluate_slates, uniform_cascade

ROOT = Path(__file__).resolve().parents[1]
RHO0, RHO1 = 0.1, 0.3
CONDITIONS = ("clean", "corrected", "uncorrected")
LABEL_TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "uniform": lambda logging: LABEL_LOGGING["uniform"],
    "fixed": lambda logging: np.eye(K)[np.full(N_CONTEXTS, 2)],
    "learned": lambda logging: LEARNED,
    "logging": lambda logging: logging,
}
"""Label targets as ``N_CONTEXTS x K`` matrices, given the logging policy's."""
SLATE_LOGGING = {"uniform": UNIFORM_SCORES, "pl": PL_LOGGING_SCORES}
SLATE_TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "pl": lambda logging: PL_TARGET_SCORES,
    "pl_soft": lambda logging: np.log(ATTRACT),
    "uniform": lambda logging: UNIFORM_SCORES,
    "logging": lambda logging: logging,
}
"""Slate targets as Plackett-Luce scores, given the logging policy's."""
Record = dict[str, float]
"""One estimate: ``value``, ``ci_low``, ``ci_high``."""


def noise(condition: str) -> tuple[float, float]:
    """The click-noise rates of a condition's log."""
    return (0.0, 0.0) if condition == "clean" else (RHO0, RHO1)


def rates(condition: str) -> tuple[float | None, float | None]:
    """The rates given to the estimators."""
    return (RHO0, RHO1) if condition == "corrected" else (None, None)


def label_target(name: str, logging: str, log: LabelLog, c: np.ndarray) -> np.ndarray | None:
    """The target ``name``'s ``n x K`` matrix on a log of ``logging`` with contexts ``c``."""
    if name == "logging":
        return logging_policy(log)
    return LABEL_TARGETS[name](LABEL_LOGGING[logging])[c]


def label_runs(seed: int, events: int, n_boot: int
               ) -> Iterator[tuple[str, str, str, dict[str, Record]]]:
    """``(logging, condition, target, {estimator: record})`` of one seed's label logs."""
    for logging_name, logging in LABEL_LOGGING.items():
        for condition in CONDITIONS:
            if condition != "uncorrected":  # uncorrected reuses the corrected one's log
                log, c = simulate_label(seed, logging, events, *noise(condition))
            for target_name in LABEL_TARGETS:
                pi = label_target(target_name, logging_name, log, c)
                result = evaluate(log, pi, *rates(condition), n_boot=n_boot, seed=seed)
                yield logging_name, condition, target_name, {
                    e: result.to_dict()[e] for e in ESTIMATORS}


def independent_ips(clicks: np.ndarray, weights: np.ndarray, condition: str) -> Record:
    """Per-slot independent IPS with a normal 95% interval (a mean of per-slate terms)."""
    r, _ = corrected_rewards(clicks, *rates(condition))
    terms = (weights * r).sum(axis=1)
    value, half = float(terms.mean()), 1.96 * float(terms.std(ddof=1)) / np.sqrt(len(terms))
    return {"value": value, "ci_low": value - half, "ci_high": value + half}


def slate_runs(seed: int, events: int, n_boot: int
               ) -> Iterator[tuple[str, str, str, dict[str, Record]]]:
    """``(logging, condition, target, {estimator: record})`` of one seed's slate logs."""
    for logging_name, logging in SLATE_LOGGING.items():
        for condition in CONDITIONS:
            if condition != "uncorrected":
                clicks, propensities, slates, c = simulate_slates(seed, logging, events,
                                                                  *noise(condition))
            for target_name, target in SLATE_TARGETS.items():
                scores = target(logging)
                pi = (None if target_name == "logging"
                      else uniform_cascade(len(c), SLOTS, scores.shape[1])
                      if target_name == "uniform"
                      else cascade_probabilities(scores[c], slates))
                result = evaluate_slates(clicks, propensities, pi, *rates(condition),
                                         n_boot=n_boot, seed=seed)
                records = {e: result.to_dict()[e] for e in SLATE_ESTIMATORS}
                records["iips"] = independent_ips(
                    clicks, independent_weights(slates, c, logging, scores), condition)
                yield logging_name, condition, target_name, records


def expected(task: str, logging: str, condition: str, target: str, estimator: str
             ) -> tuple[float, float]:
    """The truth and the predicted value of an estimate (module docstring)."""
    if task == "label":
        matrix = LABEL_LOGGING[logging]
        truth = label_value(LABEL_TARGETS[target](matrix))
        mean, slots = truth, 1
    else:
        scores = SLATE_LOGGING[logging]
        target_scores = SLATE_TARGETS[target](scores)
        truth = slate_value(target_scores)
        mean = (independent_ips_expectation(scores, target_scores) if estimator == "iips"
                else truth)
        slots = SLOTS
    if condition == "uncorrected":
        mean = slots * RHO0 + (1 - RHO0 - RHO1) * mean
    return truth, mean


def summarise(task: str, key: tuple[str, str, str, str], records: list[Record]
              ) -> dict[str, Any]:
    """Coverage and bias of one cell over its seeds."""
    logging, condition, target, estimator = key
    truth, predicted = expected(task, logging, condition, target, estimator)
    values = np.array([r["value"] for r in records])
    low, high = np.array([r["ci_low"] for r in records]), np.array([r["ci_high"] for r in records])
    se = float(values.std(ddof=1) / np.sqrt(len(values)))
    bias = float(values.mean() - truth)
    return {"task": task, "logging": logging, "condition": condition, "target": target,
            "estimator": estimator, "truth": truth, "predicted": predicted,
            "coverage_truth": float(np.mean((low <= truth) & (truth <= high))),
            "coverage_predicted": float(np.mean((low <= predicted) & (predicted <= high))),
            "mean": float(values.mean()), "bias": bias, "bias_se": se,
            "predicted_bias": predicted - truth,
            "z": (bias - (predicted - truth)) / se if se > 0 else 0.0,
            "mean_width": float(np.mean(high - low)), "seeds": len(values)}


def run(seeds: int, events: int, n_boot: int) -> dict[str, Any]:
    """Every cell of both tasks."""
    calls = seeds * 3 * (len(LABEL_LOGGING) * len(LABEL_TARGETS)
                         + len(SLATE_LOGGING) * len(SLATE_TARGETS))
    collected: dict[str, dict[tuple[str, str, str, str], list[Record]]] = {
        "label": {}, "rank": {}}
    machine = machine_info()
    started, cpu = time.perf_counter(), time.process_time()
    with tqdm(total=calls, unit="eval") as bar:
        for seed in range(seeds):
            for task, runs in (("label", label_runs), ("rank", slate_runs)):
                for logging, condition, target, records in runs(seed, events, n_boot):
                    for estimator, record in records.items():
                        collected[task].setdefault((logging, condition, target, estimator),
                                                   []).append(record)
                    bar.update(1)
    cells = [summarise(task, key, records) for task, by_key in collected.items()
             for key, records in by_key.items()]
    return {"setting": {"seeds": seeds, "events": events, "n_boot": n_boot, "level": 0.95,
                        "rho0": RHO0, "rho1": RHO1, "slots": SLOTS},
            "machine": machine, "wall_seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu, "cells": cells}


def cell_run(cells: list[tuple[str, str]], seeds: int, events: int, n_boot: int
             ) -> dict[str, Any]:
    """Only the clean label cells ``(logging, target)``, over ``seeds`` seeds: a closer
    look at a cell's coverage than 40 seeds give (the same seeds, logs and resamples as
    :func:`run` for the first 40)."""
    collected: dict[tuple[str, str, str, str], list[Record]] = {}
    started, cpu = time.perf_counter(), time.process_time()
    for seed in tqdm(range(seeds), unit="seed"):
        logs = {name: simulate_label(seed, LABEL_LOGGING[name], events)
                for name in dict.fromkeys(logging for logging, _ in cells)}
        for logging, target in cells:
            log, c = logs[logging]
            result = evaluate(log, label_target(target, logging, log, c), n_boot=n_boot,
                              seed=seed).to_dict()
            for estimator in ESTIMATORS:
                collected.setdefault((logging, "clean", target, estimator),
                                     []).append(result[estimator])
    return {"setting": {"seeds": seeds, "events": events, "n_boot": n_boot, "level": 0.95},
            "machine": machine_info(), "wall_seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu,
            "cells": [summarise("label", key, records) for key, records in collected.items()]}


def coverage_table(cells: list[dict[str, Any]]) -> str:
    """Coverage of the truth with its binomial standard error, one row per cell."""
    lines = ["| logging | target | estimator | held the truth | coverage (se) |",
             "| --- | --- | --- | --- | --- |"]
    for c in cells:
        p, seeds = c["coverage_truth"], c["seeds"]
        lines.append(f"| {c['logging']} | {c['target']} | {c['estimator']} "
                     f"| {round(p * seeds)} of {seeds} "
                     f"| {100 * p:.1f}% ({100 * np.sqrt(p * (1 - p) / seeds):.1f}) |")
    return "\n".join(lines)


def full_table(cells: list[dict[str, Any]]) -> str:
    """One row per cell."""
    lines = ["| task | logging | condition | target | estimator | coverage of truth "
             "| coverage of predicted | bias (se) | predicted bias |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        lines.append(f"| {c['task']} | {c['logging']} | {c['condition']} | {c['target']} "
                     f"| {c['estimator']} | {c['coverage_truth']:.0%} "
                     f"| {c['coverage_predicted']:.0%} | {c['bias']:+.4f} ({c['bias_se']:.4f}) "
                     f"| {c['predicted_bias']:+.4f} |")
    return "\n".join(lines)


def summary_table(cells: list[dict[str, Any]]) -> str:
    """Per task, condition and estimator, ranges over loggings and targets."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["task"], c["condition"], c["estimator"]), []).append(c)
    lines = ["| task | reward | estimator | covers truth | covers predicted "
             "| bias | predicted bias | worst \\|z\\| |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (task, condition, estimator), group in groups.items():
        def span(field: str, group: list[dict[str, Any]] = group) -> str:
            low, high = (f(g[field] for g in group) for f in (min, max))
            if field.startswith("coverage"):
                return f"{100 * low:.0f}-{100 * high:.0f}%"
            return "0" if low == high == 0 else f"{low:+.4f} to {high:+.4f}"
        worst = max(abs(g["z"]) for g in group)
        lines.append(f"| {task} | {condition} | {estimator} | {span('coverage_truth')} "
                     f"| {span('coverage_predicted')} | {span('bias')} "
                     f"| {span('predicted_bias')} | {worst:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--n-boot", type=int, default=500)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 seeds of 5,000 events, 100 resamples, no JSON "
                             "unless --json is given")
    parser.add_argument("--json", type=Path, default=None,
                        help="default bench/results/evaluation.json")
    parser.add_argument("--cells", default=None,
                        help="only these clean label cells, LOGGING/TARGET[,...] (e.g. "
                             "softmax/fixed), with their coverage's standard error; default "
                             "JSON bench/results/evaluation-cells.json")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    default = ROOT / ("bench/results/evaluation-cells.json" if args.cells
                      else "bench/results/evaluation.json")
    path = args.json or (None if args.quick else default)
    if args.render_only:
        report = json.loads((path or default).read_text())
    else:
        report = (cell_run([(cell.split("/")[0], cell.split("/")[1])
                            for cell in args.cells.split(",")], args.seeds, args.events,
                           args.n_boot) if args.cells
                  else run(3, 5_000, 100) if args.quick
                  else run(args.seeds, args.events, args.n_boot))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(report, indent=1) + "\n")
    if "rho0" not in report["setting"]:
        print(coverage_table(report["cells"]))
    else:
        print(summary_table(report["cells"]))
        print()
        print(full_table(report["cells"]))
    s = report["setting"]
    print(f"\n{s['seeds']} seeds x {s['events']:,} events, {s['n_boot']} resamples; "
          f"{report['cpu_seconds']:.0f} CPU s, {report['wall_seconds']:.0f} s wall")


if __name__ == "__main__":
    main()
