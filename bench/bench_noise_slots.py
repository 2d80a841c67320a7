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

Usage::

    .venv/bin/python bench/bench_noise_slots.py --part speed
    .venv/bin/python bench/bench_noise_slots.py --part accuracy   # about 3 CPU minutes

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
from app.learners.noise_anchor import estimate_from_anchors
from app.learners.noise_slots import estimate_slot_noise
from app.learners.rank import RidgeRanker
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("speed", "accuracy"), default="speed")
    args = parser.parse_args()
    out = {"machine": machine_info(), **(speed() if args.part == "speed" else accuracy())}
    path = RESULTS / f"noise-slots-{args.part}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("runs", "machine")}, indent=1))


if __name__ == "__main__":
    main()
