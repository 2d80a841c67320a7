"""Ranking quality under trust bias: no correction, examination only, affine corrections.

``ridge_pl`` (service defaults: ``anchor_share`` 0.03) on the trust-bias stream
(:func:`app.sim.trust.trust_simulator`, binary relevance, examination (1, 0.6, 0.35),
``rho1`` 0.1) with ``rho0_k`` per slot at two strengths, learning clicks:

* ``none``: raw clicks (``position_bias`` fixed to 1 in every slot);
* ``examination``: clicks divided by the examination it estimates (today's default);
* ``affine_true``: ``(click - beta_k) / alpha_k`` with the true parameters;
* ``affine_estimated``: the same with the per-slot estimate
  (:mod:`app.learners.noise_slots`) run every 2,500 requests and used once published,
  as the service uses it (the service runs it every 2,500 shown slots, as
  ``noisyloop replay --task rank`` does).

The metric is the share of the random-to-oracle gap closed over the last 10,000 of
40,000 requests, by the played rankings and by the greedy ones (the ranking the model
believes best, without exploration).

Usage::

    .venv/bin/python bench/results_trust.py          # about 8 CPU minutes

Writes ``bench/results/trust.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.learners.rank import RidgeRanker
from app.sim.rank import gap_closed
from app.sim.trust import RHO1, THETA, placements, trust_simulator

RESULTS = Path(__file__).resolve().parent / "results"
ROUNDS, TAIL, EVERY = 40_000, 10_000, 2_500
STRENGTHS = {"moderate": (0.2, 0.12, 0.06), "strong": (0.45, 0.2, 0.05)}
VARIANTS = ("none", "examination", "affine_true", "affine_estimated")


def run(variant: str, trust: tuple[float, ...], seed: int) -> dict[str, float]:
    """Gap closed (played, greedy) over the last :data:`TAIL` requests of one run."""
    sim = trust_simulator(seed, trust=trust)
    params: dict[str, Any] = dict(RidgeRanker.service_defaults)
    if variant == "none":
        params["position_bias"] = (1.0,) * sim.slots
    learner = RidgeRanker(n_features=sim.n_features, n_action_features=sim.n_action_features,
                          slots=sim.slots, seed=seed, **params)
    if variant == "affine_true":
        theta, rho0 = np.array(THETA), np.array(trust)
        learner.set_slot_noise((tuple(theta * (1 - RHO1 - rho0)), tuple(theta * rho0)))
    rows = placements(sim, ROUNDS, learner=learner,
                      estimate_every=EVERY if variant == "affine_estimated" else None)
    tail = rows.gap[-TAIL:]
    return {"played": gap_closed(tail[:, 0], tail[:, 1], tail[:, 2]),
            "greedy": gap_closed(tail[:, 3], tail[:, 1], tail[:, 2])}


def main() -> None:
    runs = [{"strength": name, "rho0": list(trust), "variant": v, "seed": seed,
             **run(v, trust, seed)}
            for name, trust in STRENGTHS.items() for v in VARIANTS for seed in range(3)]
    summary = {f"{s}/{v}": {k: float(np.mean([r[k] for r in runs
                                              if r["strength"] == s and r["variant"] == v]))
                            for k in ("played", "greedy")}
               for s in STRENGTHS for v in VARIANTS}
    out = {"machine": machine_info(), "rounds": ROUNDS, "tail": TAIL, "summary": summary,
           "runs": runs}
    (RESULTS / "trust.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
