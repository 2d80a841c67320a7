"""Streaming evaluation of a Parquet label log larger than it pays to hold: peak memory and
CPU time against a bare pyarrow.dataset + numpy IPS pass over the same columns.

A label log of ``--events`` events with ``--features`` features (the export
schema of ``noisyloop log export --format parquet``: ``type``, ``stream_id``,
``time``, ``features``, ``action``, ``propensity``, ``greedy_action``,
``feedback.click``) is generated into a temporary directory, files of
1,000,000 rows in row groups of 50,000 (the export's).  Each measured run is a
process of its own, reporting its peak RSS and CPU time:

* ``bare``: ``pyarrow.dataset`` batches of the same columns, to numpy, and
  IPS of the uniform policy (``sum(1 / (K p) * click) / n``): the reference;
* ``stream``: :func:`app.evaluation.streaming.evaluate_parts` (IPS, SNIPS,
  DR with its reward model's first pass over the first 1,000,000 events,
  and the bucketed bootstrap), one process;
* ``workers`` (with ``--workers N``): the same over N processes (CPU time
  of the whole process tree).

Goals: peak RSS under 1 GB, CPU at most 4x the bare pass.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_stream_eval.py \\
        --events 10000000 --json bench/results/stream-eval.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

GOAL_RSS_MB, GOAL_RATIO = 1024, 4.0
FILE_ROWS, ROW_GROUP = 1_000_000, 50_000


def generate(folder: Path, events: int, features: int, actions: int, seed: int) -> None:
    """The log (module docstring), written file by file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(features, actions))
    for k, start in enumerate(range(0, events, FILE_ROWS)):
        n = min(FILE_ROWS, events - start)
        X = rng.normal(size=(n, features))
        a = rng.integers(0, actions, n)
        logits = np.einsum("ij,ji->i", X, weights[:, a])
        click = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
        table = pa.table({
            "type": pa.array(["event"] * n),
            "stream_id": pa.array([f"{start + i}-0" for i in range(n)]),
            "time": pa.array(["2026-11-27T10:00:00.000+00:00"] * n),
            "features": pa.FixedSizeListArray.from_arrays(X.ravel(), features).cast(
                pa.list_(pa.float64())),
            "action": a, "propensity": np.full(n, 1.0 / actions), "greedy_action": a,
            "feedback": pa.StructArray.from_arrays([pa.array(click)], ["click"])})
        pq.write_table(table, folder / f"part-{k:06d}.parquet", row_group_size=ROW_GROUP)


def bare(folder: Path, actions: int) -> float:
    """The reference: uniform IPS from pyarrow.dataset batches of the same columns."""
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(folder), format="parquet")
    columns = {"type": ds.field("type"), "features": ds.field("features"),
               "action": ds.field("action"), "propensity": ds.field("propensity"),
               "click": ds.field("feedback", "click")}
    total, n = 0.0, 0
    for batch in dataset.to_batches(columns=columns, batch_size=65_536):
        event = batch.column("type").to_numpy(zero_copy_only=False) == "event"
        X = batch.column("features").flatten().to_numpy()  # read as the estimators do
        p = batch.column("propensity").to_numpy()[event]
        click = batch.column("click").to_numpy()[event]
        total += float(np.sum(click / (actions * p)))
        n += int(event.sum()) + 0 * len(X)
    return total / n


def stream(folder: Path, actions: int, workers: int) -> dict[str, Any]:
    """IPS, SNIPS and DR of the uniform policy by the streaming path."""
    from functools import partial

    from app.evaluation import parquetlog
    from app.evaluation.estimators import Options
    from app.evaluation.policies import uniform_policy
    from app.evaluation.streaming import evaluate_parts

    files = parquetlog.log_files(str(folder))
    reader = partial(parquetlog.label_batches, n_actions=actions)
    return evaluate_parts(parquetlog.parts(files), reader, uniform_policy, Options(),
                          workers).to_dict()


def measured(phase: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Run ``phase`` in a process of its own: its result, peak RSS (MB) and CPU seconds."""
    out = subprocess.run([sys.executable, __file__, "--phase", phase, "--folder", str(folder),
                          "--actions", str(args.actions), "--workers", str(args.workers)],
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def run_phase(args: argparse.Namespace) -> None:
    folder = Path(args.folder)
    wall = time.perf_counter()
    if args.phase == "bare":
        value: Any = bare(folder, args.actions)
    else:
        value = stream(folder, args.actions, args.workers if args.phase == "workers" else 1)
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"result": value, "wall_seconds": time.perf_counter() - wall,
                      "cpu_seconds": own.ru_utime + own.ru_stime + children.ru_utime
                      + children.ru_stime,
                      "peak_rss_mb": max(own.ru_maxrss, children.ru_maxrss) / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="logged events")
    parser.add_argument("--features", type=int, default=8, help="context features")
    parser.add_argument("--actions", type=int, default=5, help="actions")
    parser.add_argument("--workers", type=int, default=0,
                        help="also run the streaming path over N processes (0: not)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results")
    parser.add_argument("--phase", choices=("bare", "stream", "workers"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args)
        return

    from app.bench.machine import machine_info
    from app.bench.results import write_results

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        generate(folder, args.events, args.features, args.actions, seed=0)
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"generated {args.events:,} events ({size / 1e6:.0f} MB of Parquet) in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        runs = {"bare": measured("bare", args, folder), "stream": measured("stream", args,
                                                                           folder)}
        if args.workers > 1:
            runs["workers"] = measured("workers", args, folder)
    ratio = runs["stream"]["cpu_seconds"] / runs["bare"]["cpu_seconds"]
    ips = runs["stream"]["result"]["ips"]["value"]
    result = {"events": args.events, "features": args.features, "actions": args.actions,
              "parquet_mb": size / 1e6, "runs": runs, "ratio_stream_to_bare_cpu": ratio,
              "ips_relative_difference": abs(ips - runs["bare"]["result"])
              / abs(runs["bare"]["result"]),
              "goals": {"peak_rss_mb": GOAL_RSS_MB, "cpu_ratio": GOAL_RATIO},
              "machine": machine_info()}
    for name, run in runs.items():
        print(f"{name}: {run['cpu_seconds']:.1f} s CPU, {run['wall_seconds']:.1f} s wall, "
              f"peak RSS {run['peak_rss_mb']:.0f} MB")
    print(f"stream / bare CPU: {ratio:.2f} (goal <= {GOAL_RATIO:g}); peak RSS "
          f"{runs['stream']['peak_rss_mb']:.0f} MB (goal < {GOAL_RSS_MB} MB); IPS "
          f"{ips:.6f} vs bare {runs['bare']['result']:.6f}")
    if args.json:
        write_results(args.json, result)


if __name__ == "__main__":
    main()
