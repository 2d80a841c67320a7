"""Feedback events/s per task through HTTP: batches of 1,000 ``regression`` and
``noisy_input`` events beside ``label`` clicks (the reference), in the same run.

Starts ``noisyloop serve`` (the code of the current directory) on a temporary
data directory and creates three d = 64 models: ``label`` / ``rcnbf`` (K = 10,
the service benchmark's), ``regression`` / ``ors`` and ``noisy_input`` /
``kernel_ogd`` (the service's defaults).  Each round predicts a batch of 1,000
for each model (not timed), then POSTs each task's 1,000 feedback events in one
request, timed from send to the 202: label ``{"event_id", "click"}``,
regression one noisy label ``{"event_id", "values": [v]}``, noisy_input
``{"event_id", "target", "copies"}`` with the ``copies_needed`` noisy copies
predict asked for.  After each timed request the round waits for the trainer
(``sync``, not timed), so that the trainer's work (in the same process) does
not fall into the next timed request.  The tasks take turns inside every
round, so the label figure is a same-run reference.

Reports, per task, events/s (1,000 / the request's wall time: median and
range over the rounds), the serve process's CPU time per batch (user +
system from ``/proc`` over the timed requests, 10 ms ticks; the steadier
figure on a shared machine) and the ratio of each to label's.  The goal:
at least 10,000 regression events/s (median).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_feedback_tasks.py \\
        --json bench/results/feedback_tasks.json
    .venv/bin/python bench/bench_feedback_tasks.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
from noisyloop_client import Client, Prediction

from app.bench.machine import cpu_shares, cpu_times, linux_process_cpu_seconds, machine_info
from app.bench.results import write_results
from app.bench.service import server_process
from app.store.embedded import free_port

D, K, BATCH = 64, 10, 1000
#: The goal: regression feedback events/s with batches of 1,000 (median over rounds).
GOAL_REGRESSION = 10_000.0

Events = Callable[[list[Prediction], np.ndarray, np.random.Generator], list[dict[str, Any]]]


def _clicks(preds: list[Prediction], X: np.ndarray, rng: np.random.Generator
            ) -> list[dict[str, Any]]:
    return [{"event_id": p["event_id"], "click": bool(c)}
            for p, c in zip(preds, rng.random(len(preds)) < 0.3, strict=True)]


def _labels(preds: list[Prediction], X: np.ndarray, rng: np.random.Generator
            ) -> list[dict[str, Any]]:
    y = X.sum(axis=1) + rng.normal(0, 0.5, len(X))
    return [{"event_id": p["event_id"], "values": [float(v)]}
            for p, v in zip(preds, y, strict=True)]


def _copies(preds: list[Prediction], X: np.ndarray, rng: np.random.Generator
            ) -> list[dict[str, Any]]:
    out = []
    for p, x in zip(preds, X, strict=True):
        k = int(cast(dict[str, Any], p)["copies_needed"])
        out.append({"event_id": p["event_id"], "target": float(x.sum() / D),
                    "copies": (x + rng.normal(0, 0.1, (k, D))).tolist()})
    return out


#: task -> (model id, create_model keywords, feedback events of a predicted batch).
TASKS: dict[str, tuple[str, dict[str, Any], Events]] = {
    "label": ("fb-label", {"algorithm": "rcnbf", "n_classes": K}, _clicks),
    "regression": ("fb-regression", {"algorithm": "ors"}, _labels),
    "noisy_input": ("fb-noisy-input", {"algorithm": "kernel_ogd"}, _copies),
}



def _summary(walls: list[float], cpu: float, copies: int) -> dict[str, Any]:
    rates = [BATCH / w for w in walls]
    return {"batches": len(walls), "events_per_batch": BATCH,
            "median_ms": round(1e3 * statistics.median(walls), 2),
            "events_per_second": round(statistics.median(rates)),
            "events_per_second_range": [round(min(rates)), round(max(rates))],
            "server_cpu_ms_per_batch": round(1e3 * cpu / len(walls), 1),
            "copies_per_event": round(copies / (BATCH * len(walls)), 2) if copies else None}


def measure(url: str, key: str, pid: int, rounds: int, seed: int) -> dict[str, Any]:
    """Each task's figures over ``rounds`` interleaved rounds (plus one untimed warm-up)."""
    rng = np.random.default_rng(seed)
    walls: dict[str, list[float]] = {task: [] for task in TASKS}
    cpu = dict.fromkeys(TASKS, 0.0)
    copies = dict.fromkeys(TASKS, 0)
    with Client(url, key, timeout=120) as c:
        for task, (model, kwargs, _) in TASKS.items():
            c.create_model(model, task, D, seed=seed, **kwargs)
        for r in range(rounds + 1):
            for task, (model, _, events_of) in TASKS.items():
                X = rng.random((BATCH, D))
                events = events_of(c.predict_batch(model, X), X, rng)
                started, used = time.perf_counter(), linux_process_cpu_seconds(pid)
                result = c.feedback_batch(model, events)
                wall, used = time.perf_counter() - started, linux_process_cpu_seconds(pid) - used
                if result["accepted"] != BATCH or result["rejected"] or result.get("open"):
                    raise RuntimeError(f"{task}: not every event was joined: "
                                       f"{json.dumps(result)[:500]}")
                c.sync(model, timeout=120)
                if r == 0:
                    continue  # warm-up: caches, first snapshot
                walls[task].append(wall)
                cpu[task] += used
                copies[task] += sum(len(e.get("copies", ())) for e in events)
    return {task: _summary(walls[task], cpu[task], copies[task]) for task in TASKS}


def run(rounds: int, seed: int = 0) -> dict[str, Any]:
    """Start ``noisyloop serve``, measure, stop it; the JSON-ready report."""
    token = "bench-admin-token-" + os.urandom(12).hex()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING",
           "NOISYLOOP_ADMIN_TOKEN": token}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="nl-bench-") as tmp:
        data = Path(tmp)
        with server_process([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(data)], env, url, "/healthz",
                            data / "serve.log") as proc:
            with Client(url, admin_token=token) as admin:
                key = admin.create_tenant("bench")["api_key"]
            before = cpu_times()
            results = measure(url, key, proc.pid, rounds, seed)
            shares = cpu_shares(before, cpu_times())
    label = results["label"]
    ratios = {task: {"events_per_second": round(res["events_per_second"]
                                                / label["events_per_second"], 3),
                     "server_cpu_per_batch": round(res["server_cpu_ms_per_batch"]
                                                   / label["server_cpu_ms_per_batch"], 2)
                     if label["server_cpu_ms_per_batch"] else None}
              for task, res in results.items() if task != "label"}
    regression = results["regression"]["events_per_second"]
    return {"benchmark": "feedback_tasks", "machine": info,
            "config": {"rounds": rounds, "batch": BATCH, "n_features": D, "seed": seed,
                       "models": {task: {"task": task, **kwargs}
                                  for task, (_, kwargs, _) in TASKS.items()}},
            "results": results, "cpu_percent_during_run": shares,
            "ratios_to_label": ratios,
            "goals": {"regression_feedback_events_per_s": {
                "value": regression, "target": f">= {GOAL_REGRESSION:,.0f}",
                "met": regression >= GOAL_REGRESSION}}}


def table(report: dict[str, Any]) -> str:
    """The report as a Markdown table (as docs/benchmarks.md shows it)."""
    header = ("| task | events/s (median) | range | ms per batch | server CPU ms per batch "
              "| events/s / label's |")
    lines = [header, "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for task, res in report["results"].items():
        ratio = report["ratios_to_label"].get(task, {}).get("events_per_second", 1.0)
        low, high = res["events_per_second_range"]
        lines.append(f"| {task} | {res['events_per_second']:,} | {low:,}-{high:,} "
                     f"| {res['median_ms']} | {res['server_cpu_ms_per_batch']} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="timed batches per task (default 20)")
    parser.add_argument("--quick", action="store_true", help="3 rounds (a smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    report = run(args.rounds or (3 if args.quick else 20), args.seed)
    print(table(report))
    goal = report["goals"]["regression_feedback_events_per_s"]
    print(f"goal: regression {goal['value']:,} events/s (target {goal['target']}) "
          f"{'met' if goal['met'] else 'NOT met'}; steal "
          f"{(report['cpu_percent_during_run'] or {}).get('steal')} %")
    if args.json is not None:
        write_results(args.json, report)


if __name__ == "__main__":
    main()
