"""Our per-slot position bias beside ``ultr-bias-toolkit``'s intervention harvesting.

``ridge_pl`` at the service's defaults on the trust stream (:mod:`app.sim.trust`:
binary relevance, examination (1, 0.6, 0.35), ``rho1`` 0.1) with a fixed pool of 200
queries of 20 candidates (:func:`app.sim.harvest.pool_placements`), with ``rho0_k``
alike in every slot (the position-based model the toolkit assumes), the trust
setting of the tests and a strong one.  On the same logged rows:
:func:`app.learners.noise_slots.estimate_slot_noise` (ours, 95% interval) and the
toolkit's pivot, adjacent-chain and all-pairs estimators, each with its standard
deviation over 20 resamples of the queries, and the value the toolkit's estimates
converge to given the true parameters (:func:`app.sim.harvest.harvest_limits`).

Usage (needs the ``peer`` extra)::

    .venv/bin/python bench/results_peer.py          # about 4 CPU minutes

Prints a Markdown table; writes ``bench/results/peer.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.sim.harvest import ESTIMATORS, peer_check, pool_placements
from app.sim.trust import RHO1, THETA, TRUST_RHO0

RESULTS = Path(__file__).resolve().parent / "results"
ROUNDS, SEEDS = 30_000, (0, 1, 2)
STREAMS = {"flat": (0.1, 0.1, 0.1), "trust": TRUST_RHO0, "strong": (0.45, 0.2, 0.05)}


def run(trust: tuple[float, ...], seed: int) -> dict[str, Any]:
    """Both estimates, the toolkit's spread and the limits on one stream."""
    check = peer_check(pool_placements(seed, trust, ROUNDS), THETA, trust, RHO1, seed=seed)
    return {"ours": check.ours.theta.tolist(),
            "ours_interval": check.ours.theta_interval.tolist(),
            "published": check.ours.published, "reason": check.ours.reason,
            **{name: check.toolkit[i].tolist() for i, name in enumerate(ESTIMATORS)},
            **{f"{name}_sd": check.sd[i].tolist() for i, name in enumerate(ESTIMATORS)},
            **{f"{name}_limit": check.limits[i].tolist() for i, name in enumerate(ESTIMATORS)}}


def table(runs: dict[str, dict[str, Any]]) -> str:
    """One line per stream, seed and slot ``k >= 1``."""
    lines = ["| rho0_k | seed | slot | truth | ours (95%) | pivot | adjacent chain | all pairs "
             "| limit (pivot, chain, all pairs) |", "| --- " * 9 + "|"]
    for key, r in runs.items():
        name, seed = key.rsplit("-", 1)
        for k in range(1, len(THETA)):
            low, high = r["ours_interval"][k]
            cells = [f"{r[e][k]:.3f} ± {r[e + '_sd'][k]:.3f}" for e in ESTIMATORS]
            limits = ", ".join(f"{r[e + '_limit'][k]:.3f}" for e in ESTIMATORS)
            lines.append(f"| {STREAMS[name]} | {seed} | {k} | {THETA[k]} | {r['ours'][k]:.3f} "
                         f"({low:.3f}-{high:.3f}) | {' | '.join(cells)} | {limits} |")
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")  # the all-pairs fit's progress bar
    runs = {f"{name}-{seed}": run(trust, seed)
            for name, trust in STREAMS.items() for seed in SEEDS}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "peer.json").write_text(json.dumps(
        {"machine": machine_info(), "rounds": ROUNDS, "runs": runs}, indent=1) + "\n")
    print(table(runs))
    z = np.array([[abs(r[e][k] - r["ours"][k]) / np.hypot(
        r[e + "_sd"][k], (r["ours_interval"][k][1] - r["ours_interval"][k][0]) / 3.92)
        for e in ESTIMATORS for k in (1, 2)] for r in runs.values()])
    print("largest |toolkit - ours| / joint sd per run:",
          dict(zip(runs, z.max(axis=1).round(2).tolist(), strict=True)))


if __name__ == "__main__":
    main()
