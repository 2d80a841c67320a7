"""Peak memory of ``noisyloop evaluate --policy config:JSON`` on noisyloop logs: streamed in
batches it stays flat as the log grows; the same evaluation on the log in memory grows.

Two label logs of the export's schema are generated into a temporary
directory, a small one of ``--events`` events and a large one ``--scale``
times larger (a marker line every 1,000 events), each as JSON Lines and as
Parquet (``noisyloop log export --format parquet``'s row groups of 50,000
rows).  The small log is large enough that a full batch of either reader
(50,000 Parquet rows, 10,000 lines) is learned and a full one evaluated, so
that the two logs differ only in how many batches they hold (a smaller log's
peak is lower: its batches are cut by the split).  Each measured run is a
process of its own, reporting its peak RSS (``VmHWM``: ``ru_maxrss`` would
count the parent's at the fork) and, in a second process, its peak of
``tracemalloc`` (the Python and numpy heap, without the interpreter's and
the libraries' fixed share):

* ``jsonl`` / ``parquet``: ``noisyloop evaluate --format noisyloop --policy
  config:JSON`` on the export (:mod:`app.evaluation.configrun`, batches of
  10,000 lines or 65,536 rows);
* ``memory``: the reference, the same numbers from the JSON Lines log read
  whole (``read_label_log``, ``config_policy``, ``evaluate``), as the
  command computed them before it streamed.

Reported per run: large / small peak (the ratio against the same run's
small log).  Goal: the streamed runs' ratios at most 1.25 (flat), while the
in-memory run's grows with the log.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_config_stream.py \\
        --events 150000 --scale 4 --json bench/results/config-stream.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

CONFIG = {"algorithm": "linucb_diag", "params": {"alpha": 0.1}}
FRACTION = 0.5
GOAL_RATIO = 1.25
PAGE_LINES = 10_000
RUNS = ("jsonl", "parquet", "memory")


def generate(folder: Path, events: int, seed: int) -> None:
    """The log (module docstring) as ``log.jsonl`` and ``export/``, page by page."""
    from app.commands.log import write_jsonl
    from app.commands.log_parquet import write_pages
    from app.evaluation.simulate import SOFTMAX, simulate_label

    def pages() -> Any:
        for start in range(0, events, PAGE_LINES):
            log, _ = simulate_label(seed + start, SOFTMAX, min(PAGE_LINES, events - start))
            lines: list[dict[str, Any]] = []
            for i in range(log.n):
                if (start + i) % 1000 == 7:
                    lines.append({"type": "rollback", "stream_id": f"{start + i}-1",
                                  "time": "t"})
                lines.append({"type": "event", "stream_id": f"{start + i}-0", "time": "t",
                              "features": log.X[i].tolist(), "action": int(log.actions[i]),
                              "propensity": float(log.propensities[i]), "greedy_action": 0,
                              "feedback": {"click": float(log.rewards[i])}})
            yield b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    write_jsonl(pages(), folder / "log.jsonl", lambda n: None)
    write_pages(((page, None) for page in pages()), folder / "export", 0, lambda n: None)


def evaluated(run: str, folder: Path) -> dict[str, Any]:
    """The result of ``run`` on the log in ``folder`` (module docstring)."""
    if run == "memory":
        from app.evaluation.estimators import evaluate
        from app.evaluation.servicelog import read_label_log
        from app.evaluation.training import config_policy

        read = read_label_log(folder / "log.jsonl")
        trained = config_policy(CONFIG, "label", read.label_log(), FRACTION)
        return evaluate(trained.log, trained.pi).to_dict()
    from app.commands import evaluate as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    log = folder / ("log.jsonl" if run == "jsonl" else "export")
    args = parser.parse_args(["evaluate", "--no-progress", "--format", "noisyloop", "--log",
                              str(log), "--policy", "config:" + json.dumps(CONFIG),
                              "--train-fraction", str(FRACTION)])
    return command.run(args)


def peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM`` of ``/proc/self/status``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_phase(args: argparse.Namespace) -> None:
    """One measured run in this process: its result, seconds and peak memory (JSON)."""
    if args.traced:
        tracemalloc.start()
    wall = time.perf_counter()
    result = evaluated(args.phase, Path(args.folder))
    out = {"ips": result["ips"]["value"], "n": result["n"],
           "wall_seconds": time.perf_counter() - wall,
           "peak_rss_mb": peak_rss_mb()}
    if args.traced:
        out["peak_traced_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    print(json.dumps(out))


def measured(phase: str, folder: Path, traced: bool) -> dict[str, Any]:
    """``phase`` in a process of its own (module docstring)."""
    command = [sys.executable, __file__, "--phase", phase, "--folder", str(folder)]
    out = subprocess.run(command + (["--traced"] if traced else []), check=True,
                         capture_output=True, text=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=150_000, help="the small log's events")
    parser.add_argument("--scale", type=int, default=4, help="the large log's size / small's")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results")
    parser.add_argument("--phase", choices=RUNS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args)
        return

    from app.bench.machine import machine_info
    from app.bench.results import write_results

    sizes = {"small": args.events, "large": args.events * args.scale}
    runs: dict[str, dict[str, Any]] = {name: {} for name in RUNS}
    with tempfile.TemporaryDirectory() as tmp:
        for size, events in sizes.items():
            folder = Path(tmp) / size
            folder.mkdir()
            generate(folder, events, seed=0)
            for name in RUNS:
                rss = measured(name, folder, traced=False)
                rss["peak_traced_mb"] = measured(name, folder, traced=True)["peak_traced_mb"]
                runs[name][size] = rss
                print(f"{name} {size} ({events:,} events): peak RSS {rss['peak_rss_mb']:.0f} "
                      f"MB, traced {rss['peak_traced_mb']:.1f} MB, "
                      f"{rss['wall_seconds']:.1f} s", flush=True)
    ratios = {name: {key: run["large"][key] / run["small"][key]
                     for key in ("peak_rss_mb", "peak_traced_mb")} for name, run in runs.items()}
    for name, ratio in ratios.items():
        print(f"{name}: large / small peak RSS {ratio['peak_rss_mb']:.2f}, traced "
              f"{ratio['peak_traced_mb']:.2f} (streamed goal <= {GOAL_RATIO:g})")
    same = all(abs(runs[name]["large"]["ips"] - runs["memory"]["large"]["ips"]) < 1e-9
               for name in ("jsonl", "parquet"))
    print(f"streamed IPS equals the in-memory IPS: {same}")
    if args.json:
        write_results(args.json, {"sizes": sizes, "config": CONFIG, "runs": runs,
                                  "ratios": ratios, "goal_ratio": GOAL_RATIO,
                                  "same_ips": same, "machine": machine_info()})


if __name__ == "__main__":
    main()
