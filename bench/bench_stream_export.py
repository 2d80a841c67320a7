"""Peak memory of ``noisyloop log export --format parquet`` writing 1,000,000 logged events.

The pages are the service's (JSON Lines of a label model's log, 10,000 lines
a page, the client's page size), made on the fly with the fields the
service logs (``type``, ``stream_id``, ``time`` over two days, ``joined_at``,
``event_id``, ``kind``, ``model_version``, ``--features`` features,
``action``, ``propensity``, ``greedy_action``, ``feedback.click``), and
written by :func:`app.commands.log_parquet.write_pages` into a temporary
directory, in a process of its own that reports its peak RSS and CPU time
(the HTTP transfer is not measured: the pages are what the client hands
over).  ``noisyloop evaluate`` then reads the directory back (events
counted).  Goal: peak RSS under 300 MB.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_stream_export.py \\
        --json bench/results/stream-export.json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

GOAL_RSS_MB = 300
PAGE = 10_000


def pages(events: int, features: int, seed: int) -> Iterator[tuple[bytes, str | None]]:
    """The log's pages (module docstring) with the position after each."""
    import orjson

    rng = np.random.default_rng(seed)
    for start in range(0, events, PAGE):
        n = min(PAGE, events - start)
        X = rng.normal(size=(n, features)).round(6).tolist()
        a = rng.integers(0, 5, n).tolist()
        click = (rng.random(n) < 0.3).tolist()
        lines = []
        for i in range(n):
            day = 26 + 2 * (start + i) // events
            lines.append(orjson.dumps({
                "type": "event", "stream_id": f"{1_700_000_000_000 + start + i}-0",
                "time": f"2026-11-{day}T10:00:00.000+00:00",
                "joined_at": f"2026-11-{day}T10:00:00.000+00:00",
                "event_id": f"ev-{start + i}", "kind": "feedback", "model_version": 3,
                "features": X[i], "action": a[i], "propensity": 0.2, "greedy_action": a[i],
                "feedback": {"click": float(click[i])}}))
        after = f"{start + n}-0" if start + n < events else None
        yield b"\n".join(lines) + b"\n", after


def run_phase(args: argparse.Namespace) -> None:
    from app.commands.log_parquet import write_pages

    started = time.perf_counter()
    rows = write_pages(pages(args.events, args.features, 0), Path(args.folder), 0,
                       lambda n: None)
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"rows": rows, "wall_seconds": time.perf_counter() - started,
                      "cpu_seconds": own.ru_utime + own.ru_stime,
                      "peak_rss_mb": own.ru_maxrss / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="logged events")
    parser.add_argument("--features", type=int, default=8, help="context features")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args)
        return

    from app.bench.machine import machine_info
    from app.bench.results import write_results
    from app.evaluation import parquetlog

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, __file__, "--phase", "--folder", tmp,
                              "--events", str(args.events), "--features", str(args.features)],
                             check=True, capture_output=True, text=True)
        run: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
        files = parquetlog.log_files(tmp)
        run["files"] = [str(Path(f).relative_to(tmp)) for f in files]
        run["parquet_mb"] = sum(Path(f).stat().st_size for f in files) / 1e6
        run["events_read_back"] = sum(log.n for part in parquetlog.parts(files)
                                      for log, _ in parquetlog.label_batches(part, 5))
    result = {"events": args.events, "features": args.features, "export": run,
              "goal_peak_rss_mb": GOAL_RSS_MB, "machine": machine_info()}
    print(f"export of {args.events:,} events: peak RSS {run['peak_rss_mb']:.0f} MB (goal < "
          f"{GOAL_RSS_MB} MB), {run['cpu_seconds']:.1f} s CPU, {len(files)} files, "
          f"{run['parquet_mb']:.0f} MB; read back {run['events_read_back']:,} events")
    if args.json:
        write_results(args.json, result)


if __name__ == "__main__":
    main()
