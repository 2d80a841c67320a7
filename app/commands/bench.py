"""``noisyloop bench learners|service``: throughput figures with same-run references.

``bench learners`` times every label / label_set learner in process beside a
plain numpy loop and Vowpal Wabbit's Python binding (when the ``bench``
extra is installed); ``bench service`` drives a running (or freshly started)
``noisyloop serve`` with a load generator in its own process.  Both print a
table and write the full report (machine, versions, figures, ratios, goals)
as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.optional import CLIENT, require


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bench", help="throughput benchmarks with same-run references")
    inner = parser.add_subparsers(dest="bench", required=True)

    learners = inner.add_parser("learners", help="in-process learner throughput vs numpy and VW")
    learners.add_argument("--quick", action="store_true", help="short run (a few seconds each)")
    learners.add_argument("--datasets", nargs="+", default=["synsep", "digits"],
                          help="data sets to stream (default synsep digits)")
    learners.add_argument("--seed", type=int, default=0,
                          help="seed of the data, stream order, click noise and learners "
                               "(default 0)")
    learners.add_argument("--no-vw", action="store_true", help="skip Vowpal Wabbit")
    learners.add_argument("--json", type=Path, help="write the report here")
    learners.set_defaults(handler=run_learners)

    service = inner.add_parser("service", help="service req/s, latency, batch and trainer "
                                               "throughput vs a bare FastAPI + Redis GET")
    service.add_argument("--quick", action="store_true", help="3 s per phase instead of 10")
    service.add_argument("--url", help="use a running service (default: start noisyloop serve)")
    service.add_argument("--admin-token", help="admin token of --url")
    service.add_argument("--api-workers", type=int, default=1,
                         help="serve the load from `noisyloop api --workers N` (and run the "
                              "baseline with N workers)")
    service.add_argument("--json", type=Path, help="write the report here")
    service.set_defaults(handler=run_service)


def _write(report: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
        print(f"wrote {path}")


def _goal_lines(goals: dict[str, Any]) -> list[str]:
    lines = []
    for name, g in goals.items():
        verdict = {True: "met", False: "NOT met", None: "not measured"}[g["met"]]
        lines.append(f"goal {name}: {g['value']} (target {g['target']}) {verdict}")
    return lines


def run_learners(args: argparse.Namespace) -> int:
    from app.bench.learners import Measurement, run

    def show(m: Measurement) -> None:
        if not m.events:
            print(f"{m.dataset:7s} {m.learner:28s} {m.mode:22s} {m.note}", flush=True)
            return
        print(f"{m.dataset:7s} {m.learner:28s} {m.mode:22s} {m.per_cpu_second:12,.0f} /CPU-s "
              f"{m.cpu_us_per_event:9.2f} CPU-us  (wall {m.per_second:12,.0f} /s)", flush=True)

    report = run(quick=args.quick, datasets=args.datasets, seed=args.seed, vw=not args.no_vw,
                 progress=show)
    for ds, row in report["ratios"].items():
        for key, value in row.items():
            print(f"{ds:7s} {key:42s} {value}")
    for ds, pair in report["paired_rcnbf_over_vw_cb_explore"].items():
        print(f"{ds:7s} rcnbf / vw --cb_explore, back-to-back pairs (CPU): {pair['ratios']} "
              f"median {pair['median']}")
    for line in _goal_lines(report["goals"]):
        print(line)
    _write(report, args.json)
    return 0


def run_service(args: argparse.Namespace) -> int:
    require("noisyloop_client", CLIENT, "noisyloop bench service")
    from app.bench.service import run

    report = run(quick=args.quick, url=args.url, admin_token=args.admin_token,
                 api_workers=args.api_workers)
    print(json.dumps({k: report[k] for k in ("results", "ratios")}, indent=1))
    for line in _goal_lines(report["goals"]):
        print(line)
    _write(report, args.json)
    return 0
