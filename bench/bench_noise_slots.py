"""Per-slot click-noise estimate (:mod:`app.learners.noise_slots`): cost and accuracy.

``--part speed``: CPU seconds (``time.process_time``, one thread) of one
estimate on the rows of 20,000 requests of 3 slots (60,000 rows, the budget
is 2 s of a core), against the label task's anchor estimate on the same
number of rows in the same run (the reference).

``--part accuracy``: ``ridge_pl`` with its service default ``anchor_share`` on
the trust-bias stream (:func:`app.sim.trust.trust_simulator`, binary
relevance) for 30,000 requests, seeds 0-4, and on graded relevance (logit
scales 2.0 and 0.7), seed 0: the estimate on the newest rows, its errors against
the truth, interval coverage, and the share of the random-to-oracle gap the
played rankings closed over the last 10,000 requests, with and without the
anchor share (what the anchor placements cost).

``--part publish``: when the service's rule publishes, and whether what it
publishes holds the truth, on three worlds of 3 slots at service defaults
(``noisyloop replay --task rank --dataset sim`` itself: the jobs role's estimate,
schedule and publish rule, the learner learning what is published), learning
in batches of 100 requests, 20,000 requests, seeds 0-9: ``trust8`` (trust bias
(0.2, 0.12, 0.06), rho1 0.1, binary relevance, 8 candidates), ``flips50`` (click
noise flips (0.03, 0.3), 50 candidates, 16 + 16 features: the rank benchmark's
world) and ``flips8`` (the default stream with 8 candidates).  Per seed: the
requests at which examination and the whole estimate were first published, the
estimate in force at the end (examination alone until the whole is published),
and which of its published 95% intervals hold the stream's truth
(:meth:`~app.sim.rank.RankSimulator.slot_noise`).

Usage::

    .venv/bin/python bench/bench_noise_slots.py --part speed
    .venv/bin/python bench/bench_noise_slots.py --part accuracy   # about 3 CPU minutes
    .venv/bin/python bench/bench_noise_slots.py --part publish    # about 3 CPU minutes

Writes ``bench/results/noise-slots-<part>.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.cli import build_parser
from app.learners.noise_anchor import estimate_from_anchors
from app.learners.noise_slots import estimate_slot_noise
from app.learners.rank import RidgeRanker
from app.replay import rank as rank_replay
from app.sim.rank import gap_closed
from app.sim.trust import RHO1, THETA, TRUST_RHO0, placements, simulated_placements, trust_simulator

RESULTS = Path(__file__).resolve().parent / "results"
REQUESTS = 20_000


def cpu_seconds(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Smallest CPU time of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def speed() -> dict[str, Any]:
    """CPU seconds per estimate on 20,000 requests' rows, and the reference's."""
    slot, prob, score, click, _ = simulated_placements(REQUESTS, seed=0)
    slots = cpu_seconds(lambda: estimate_slot_noise(slot, prob, score, click, len(THETA)))
    ref = cpu_seconds(lambda: estimate_from_anchors(prob, score, click, 4))
    return {"requests": REQUESTS, "rows": int(slot.shape[0]), "cpu_seconds": slots,
            "reference_cpu_seconds": ref, "ratio_to_reference": slots / ref,
            "budget_cpu_seconds": 2.0}


def _errors(est: Any) -> dict[str, Any]:
    theta, rho0 = np.array(THETA), np.array(TRUST_RHO0)
    cover = [bool(lo <= t <= hi) for (lo, hi), t in zip(est.theta_interval[1:], theta[1:],
                                                       strict=True)]
    cover += [bool(lo <= r <= hi) for (lo, hi), r in zip(est.rho0_interval, rho0, strict=True)]
    cover.append(bool(est.rho1_interval[0] <= RHO1 <= est.rho1_interval[1]))
    return {"published": est.published, "reason": est.reason,
            "theta": est.theta.round(4).tolist(), "rho0": est.rho0.round(4).tolist(),
            "rho1": round(float(est.rho1), 4), "max_width": float(est.widths.max()),
            "flatness": [round(float(v), 4) for v in est.flatness],
            "theta_error": float(np.abs(est.theta - theta).max()),
            "rho0_error": float(np.abs(est.rho0 - rho0).max()),
            "rho1_error": abs(float(est.rho1) - RHO1), "covered": cover}


def run(seed: int, anchor_share: float, binary: bool = True, scale: float = 2.0
        ) -> dict[str, Any]:
    """One stream through ``ridge_pl`` and the estimate on its rows."""
    sim = trust_simulator(seed, binary=binary, scale=scale)
    learner = RidgeRanker(n_features=sim.n_features, n_action_features=sim.n_action_features,
                          slots=sim.slots, seed=seed, anchor_share=anchor_share)
    rows = placements(sim, 30_000, learner=learner)
    est = estimate_slot_noise(rows.slot, rows.prob, rows.score, rows.click, sim.slots)
    return {"seed": seed, "anchor_share": anchor_share, "binary": binary, "scale": scale,
            "gap_closed_last_10000": gap_closed(*rows.gap[-10_000:, :3].T), **_errors(est)}


def accuracy() -> dict[str, Any]:
    """The runs of the module docstring."""
    share = RidgeRanker.service_defaults["anchor_share"]
    runs = [run(seed, share) for seed in range(5)]
    runs += [run(seed, 0.0) for seed in range(5)]
    runs += [run(0, share, binary=False, scale=s) for s in (2.0, 0.7)]
    binary = [r for r in runs[:5]]
    cover = [c for r in binary for c in r["covered"]]
    return {"runs": runs, "binary_coverage": float(np.mean(cover)),
            "binary_max_errors": {k: max(r[f"{k}_error"] for r in binary)
                                  for k in ("theta", "rho0", "rho1")},
            "gap_closed_mean": {"anchor_share": float(np.mean(
                [r["gap_closed_last_10000"] for r in runs[:5]])), "none": float(np.mean(
                    [r["gap_closed_last_10000"] for r in runs[5:10]]))}}


#: ``noisyloop replay`` options of the worlds of ``--part publish``.
WORLDS = {
    "trust8": ["--candidates", "8", "--trust", "0.2,0.12,0.06", "--click-noise", "0,0.1",
               "--binary"],
    "flips50": ["--candidates", "50", "--context-features", "16", "--action-features", "16",
                "--click-noise", "0.03,0.3"],
    "flips8": ["--candidates", "8"],
}
PUBLISH_REQUESTS = 20_000


def in_force(estimates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The estimate in force after ``estimates`` (outcomes in order) by the service's rule
    (:func:`~app.learners.noise_publish.replaces_slots`)."""
    current: dict[str, Any] | None = None
    for e in estimates:
        whole = current is not None and current["status"] == "published"
        if e["status"] == "published" or (e.get("theta_published") and not whole):
            current = e
    return current


def publish_run(world: str, seed: int) -> dict[str, Any]:
    """One replay of ``world`` (:data:`WORLDS`) and what its estimates published."""
    args = build_parser().parse_args(
        ["replay", "--task", "rank", "--dataset", "sim", "--rounds", str(PUBLISH_REQUESTS),
         "--learn-batch", "100", "--seed", str(seed), *WORLDS[world]])
    extra = rank_replay.run(args, seed, lambda n: None).extra
    estimates = extra["noise_estimates"]
    first = {name: next((e["t"] for e in estimates if test(e)), None) for name, test in (
        ("theta", lambda e: e["status"] == "published" or e.get("theta_published")),
        ("whole", lambda e: e["status"] == "published"))}
    force = in_force(estimates)
    run = {"world": world, "seed": seed, "first_published": first,
           "last_reason": estimates[-1]["reason"] if estimates else None,
           "position_bias": extra["position_bias"],
           "position_bias_source": extra["position_bias_source"],
           "truth": extra["slot_noise_true"], "position_bias_true": extra["position_bias_true"],
           "in_force": None if force is None else {
               "t": force["t"], "status": force["status"],
               "slots": [{k: row[k] for k in ("theta", "rho0", "rho1", "interval")}
                         for row in force["slots"]]}}
    return {**run, "covered": covered(run)}


def covered(run: dict[str, Any]) -> dict[str, bool]:
    """Whether each published interval of the estimate in force holds the stream's truth
    (``theta_k`` for ``k >= 1``; with the whole estimate ``rho0_k`` and ``rho1`` once)."""
    force = run["in_force"]
    if force is None:
        return {}
    out: dict[str, bool] = {}
    for k, (row, true) in enumerate(zip(force["slots"], run["truth"], strict=True)):
        names = ["theta"] * (k > 0) + (["rho0"] + ["rho1"] * (k == 0)) * (
            force["status"] == "published")
        for name in names:
            low, high = row["interval"][name]
            out[f"{name}_{k}" if name != "rho1" else name] = bool(low <= true[name] <= high)
    return out


def publish(worlds: list[str], seeds: range) -> dict[str, Any]:
    """The runs of the module docstring's ``--part publish`` and their summary per world."""
    runs = [publish_run(w, s) for w in worlds for s in seeds]
    return {"requests": PUBLISH_REQUESTS, "runs": runs, "summary": summary(runs)}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per world: seeds published by 20,000 requests (examination, whole), when, and how many
    published intervals of the estimates in force at the end hold the truth."""
    out = {}
    for w in dict.fromkeys(r["world"] for r in runs):
        mine = [r for r in runs if r["world"] == w]
        cover = {kind: [v for r in mine for k, v in r["covered"].items()
                        if k.startswith("theta") == (kind == "theta")]
                 for kind in ("theta", "rates")}
        out[w] = {
            "seeds": len(mine),
            "theta_published_by_20000": sum(r["first_published"]["theta"] is not None
                                            for r in mine),
            "whole_published_by_20000": sum(r["first_published"]["whole"] is not None
                                            for r in mine),
            "theta_first_published": [r["first_published"]["theta"] for r in mine],
            "whole_first_published": [r["first_published"]["whole"] for r in mine],
            "theta_intervals_covered": [int(sum(cover["theta"])), len(cover["theta"])],
            "rate_intervals_covered": [int(sum(cover["rates"])), len(cover["rates"])],
            "seeds_all_covered": sum(all(r["covered"].values()) for r in mine)}
    return out


def resummarise(path: Path) -> dict[str, Any]:
    """A ``--part publish`` output's coverage and summary recomputed from its runs."""
    out: dict[str, Any] = json.loads(path.read_text())
    for run in out["runs"]:
        run["covered"] = covered(run)
    out["summary"] = summary(out["runs"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("speed", "accuracy", "publish"), default="speed")
    parser.add_argument("--worlds", default=",".join(WORLDS),
                        help="--part publish: comma-separated worlds")
    parser.add_argument("--seeds", type=int, default=10, help="--part publish: N seeds")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="--part publish: the first of the seeds")
    parser.add_argument("--out", type=Path, default=None, help="output JSON (default: "
                        "bench/results/noise-slots-<part>.json)")
    parser.add_argument("--summarise", type=Path, default=None, help="--part publish: "
                        "recompute the coverage and summary of this output, in place")
    args = parser.parse_args()
    if args.summarise:
        out = resummarise(args.summarise)
        args.summarise.write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out["summary"], indent=1))
        return
    part = {"speed": speed, "accuracy": accuracy,
            "publish": lambda: publish(args.worlds.split(","),
                                       range(args.first_seed, args.first_seed + args.seeds))
            }[args.part]
    out = {"machine": machine_info(), **part()}
    path = args.out or RESULTS / f"noise-slots-{args.part}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("runs", "machine")}, indent=1))


if __name__ == "__main__":
    main()
