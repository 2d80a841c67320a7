"""Learners alone: ``learn_many`` events per CPU-second, compiled and numpy, beside Vowpal Wabbit.

The service benchmark's shape (d = 64 uniform features, K = 10 labels drawn
uniformly as the right ones, clicks flipped with rho0 = 0.1, rho1 = 0.3).  For
each ``label`` learner: a log of ``--events`` decisions made by the learner
itself (untimed), then ``learn_many`` on fresh copies in batches of
``--batch`` events, timed in CPU seconds, once with the compiled kernels
(:mod:`app.learners.jit`) and once with the numpy paths.  The anchor
estimator's progressive scorer (``score_and_learn``) is timed the same way.
Vowpal Wabbit's Python binding learns the same logged events (action,
probability, cost ``1 - click``) with ``--cb_explore 10`` and
``--cb_explore_adf -q sa``, its text examples built before the timer (VW's
fastest form; building them is timed apart).  Each figure is the best of
``--repeats``; everything in one process, one after the other, so the ratios
are same-run ratios.

``--compile`` also measures numba's first-call cost in fresh interpreters:
``import numba`` plus the first ``learn_many`` with an empty cache (compiling)
and with the cache written (loading), minus a later call's time.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_kernels.py --compile \\
        --json bench/results/kernels-learners.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from app.bench.machine import machine_info
from app.bench.results import write_results
from app.bench.vw import VWBandit, vw_available, vw_text
from app.learners import jit, registry
from app.learners.base import Learner, stack_events
from app.learners.noise_anchor import ProgressiveScorer
from app.sim.feedback import noisy_clicks

D, K = 64, 10
#: Learners timed: (name shown, algorithm, params).
LEARNERS: list[tuple[str, str, dict[str, Any]]] = [
    ("linucb_diag (half_life 700)", "linucb_diag", {"half_life": 700.0}),
    ("linucb_diag (half_life null)", "linucb_diag", {"half_life": None}),
    ("squarecb_diag", "squarecb_diag", {}),
    ("lints_diag", "lints_diag", {}),
    ("linucb", "linucb", {}),
    ("rcnbf", "rcnbf", {"rho0": 0.1, "rho1": 0.3}),
    ("rcine", "rcine", {"rho0": 0.1, "rho1": 0.3}),
    ("banditron", "banditron", {}),
    ("soba", "soba", {}),
    ("bpa", "bpa", {}),
    ("perceptron", "perceptron", {}),
]


def logged(algorithm: str, params: dict[str, Any], X: np.ndarray, y: np.ndarray,
           rng: np.random.Generator) -> list[dict[str, Any]]:
    """The learner's own decisions on ``X``, learned as it goes, with its feedback: a noisy
    click, or the right label (``perceptron``, full information)."""
    model = registry.build("label", algorithm, D, K, params, seed=0)
    events = []
    for lo in range(0, len(X), 1000):
        contexts = [d.context for d in model.decide_many(X[lo:lo + 1000])]
        played = np.array([int(c["played"]) for c in contexts])
        right = y[lo:lo + len(contexts)]
        clicks = noisy_clicks((played == right).astype(float), 0.1, 0.3, rng)
        chunk = [{**c, "click": float(k), "label": int(r)}
                 for c, k, r in zip(contexts, clicks, right, strict=True)]
        chunk = [{f: e[f] for f in e if f in c or f in model.feedback_fields}
                 for e, c in zip(chunk, contexts, strict=True)]
        model.learn_many(stack_events(chunk))
        events.extend(chunk)
    return events


def cpu_rate(run: Callable[[], int], repeats: int) -> float:
    """Best events per CPU-second of ``run`` (which returns the events it learned)."""
    best = 0.0
    for _ in range(repeats):
        cpu = time.process_time()
        n = run()
        best = max(best, n / max(time.process_time() - cpu, 1e-9))
    return best


def learner_rate(algorithm: str, params: dict[str, Any], batches: list[dict[str, np.ndarray]],
                 repeats: int, compiled: bool) -> float:
    jit.ENABLED = compiled

    def run() -> int:
        model: Learner = registry.build("label", algorithm, D, K, params, seed=0)
        for batch in batches:
            model.learn_many(batch)
        return sum(len(b["played"]) for b in batches)

    try:
        run()  # warm-up: compile or load the kernels, fill caches
        return cpu_rate(run, repeats)
    finally:
        jit.ENABLED = True


def scorer_rate(batches: list[dict[str, np.ndarray]], repeats: int, compiled: bool) -> float:
    jit.ENABLED = compiled

    def run() -> int:
        scorer = ProgressiveScorer(D, K)
        for b in batches:
            scorer.score_and_learn(b["x"], b["played"], b["click"])
        return sum(len(b["played"]) for b in batches)

    try:
        run()
        return cpu_rate(run, repeats)
    finally:
        jit.ENABLED = True


def vw_rates(events: list[dict[str, Any]], adf: bool, repeats: int) -> dict[str, float]:
    """VW's learn on the logged events: per CPU-second with text prebuilt, and the text's
    cost alone."""
    cpu = time.process_time()
    texts = [vw_text(np.asarray(e["x"]), adf) for e in events]
    text_rate = len(events) / max(time.process_time() - cpu, 1e-9)

    def run() -> int:
        model = VWBandit(K, 0, adf)
        for text, e in zip(texts, events, strict=True):
            model.learn(text, int(e["played"]), 1.0 - float(e["click"]), float(e["prob"]))
        model.finish()
        return len(events)

    return {"learn_per_cpu_second": cpu_rate(run, repeats),
            "text_per_cpu_second": text_rate}


COMPILE_PROBE = """
import json, os, sys, time
import numpy as np
cpu = time.process_time()
from app.learners import jit
from app.learners.ridge import LinUCBDiag
imported = time.process_time() - cpu
assert jit.ENABLED
rng = np.random.default_rng(0)
batch = {"x": rng.random((1000, 64)), "played": rng.integers(0, 10, 1000),
         "click": rng.integers(0, 2, 1000).astype(float)}
model = LinUCBDiag(n_features=64, n_classes=10)
cpu = time.process_time(); model.learn_many(batch); first = time.process_time() - cpu
cpu = time.process_time(); model.learn_many(batch); later = time.process_time() - cpu
print(json.dumps({"import_learners": imported, "first_call": first, "later_call": later}))
"""


def compile_cost() -> dict[str, Any]:
    """numba's first-call cost in fresh interpreters: an empty cache, then the written one."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for name in ("empty_cache", "cache_written"):
            run = subprocess.run([sys.executable, "-c", COMPILE_PROBE], env=env, check=True,
                                 capture_output=True, text=True)
            measured = json.loads(run.stdout.strip().splitlines()[-1])
            out[name] = {k: round(v, 4) for k, v in measured.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="algorithms to time (default: all)")
    parser.add_argument("--compile", action="store_true", help="measure numba's first call")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    X, y = rng.random((args.events, D)), rng.integers(0, K, args.events)
    rows: list[dict[str, Any]] = []
    reference: list[dict[str, Any]] | None = None
    for name, algorithm, params in LEARNERS:
        if args.only and algorithm not in args.only:
            continue
        events = logged(algorithm, params, X, y, np.random.default_rng(args.seed + 1))
        reference = reference or events
        batches = [stack_events(events[lo:lo + args.batch])
                   for lo in range(0, len(events), args.batch)]
        row = {"learner": name,
               "compiled": learner_rate(algorithm, params, batches, args.repeats, True),
               "numpy": learner_rate(algorithm, params, batches, args.repeats, False)}
        rows.append(row)
        print(f"{name:32s} compiled {row['compiled']:>12,.0f}  numpy {row['numpy']:>12,.0f}",
              flush=True)
        if algorithm == "linucb_diag" and params.get("half_life") is None:
            row = {"learner": "progressive scorer (anchor)",
                   "compiled": scorer_rate(batches, args.repeats, True),
                   "numpy": scorer_rate(batches, args.repeats, False)}
            rows.append(row)
            print(f"{row['learner']:32s} compiled {row['compiled']:>12,.0f}  "
                  f"numpy {row['numpy']:>12,.0f}", flush=True)
    vw: dict[str, Any] = {}
    if vw_available() and reference is not None:
        for adf, label in ((False, f"--cb_explore {K}"), (True, "--cb_explore_adf -q sa")):
            vw[label] = vw_rates(reference, adf, args.repeats)
            print(f"vw {label:28s} learn {vw[label]['learn_per_cpu_second']:>12,.0f}  "
                  f"text {vw[label]['text_per_cpu_second']:>12,.0f}", flush=True)
    ratios = {}
    main_row = next((r for r in rows if r["learner"] == LEARNERS[0][0]), None)
    if main_row and vw:
        ratios = {"linucb_diag_700_over_vw_cb_explore":
                  main_row["compiled"] / vw[f"--cb_explore {K}"]["learn_per_cpu_second"]}
        print(f"linucb_diag (half_life 700) compiled / vw --cb_explore {K}: "
              f"{ratios['linucb_diag_700_over_vw_cb_explore']:.1f}x")
    results: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "learners": rows,
                               "vw": vw, "ratios": ratios}
    if args.compile:
        results["compile"] = compile_cost()
        print("numba first call:", results["compile"])
    if args.json:
        write_results(args.json, results)


if __name__ == "__main__":
    main()
