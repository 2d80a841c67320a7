"""What the per-slot estimate's anchor bands hold, and how often a rank model shows published rates.

On the worlds of ``bench/bench_noise_slots.py --part publish`` (``ridge_pl`` at service
defaults, batches of 100 requests, 20,000 requests, the service's per-slot refresh
:class:`~app.learners.slot_refresh.SlotRefresh`), seeds 0-9, the rows the last estimate
used (:func:`app.sim.trust.placements` logs each row's true relevance ``gamma``):

* per slot, the bottom band's rows, their mean relevance (the anchor assumes 0) and click
  rate; the band's *true* click rate ``v_k`` (the mean of each row's click probability,
  ``theta'_k (rho0'_k + gamma (1 - rho1 - rho0'_k))`` in the stream's per-slot model);
  whether the last estimate's ``rho0_k`` interval holds the parameter ``rho0_k`` and
  whether its ``v_k`` side holds the band's true click rate (``rho0_0 = v_0``: the
  interval's variance is then right, and a miss of the parameter is the band's bias);
* the top band's mean relevance per slot (the anchor assumes 1);
* every refresh's outcome, and after each whether the model shows published rates before
  withdrawal (published once, kept) and with it
  (:func:`~app.learners.noise_publish.shows_published`).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_noise_bands.py --worlds flips50,trust8

Writes ``bench/results/noise-bands.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_noise_slots import WORLDS  # the same worlds (this script's folder is on sys.path)

from app.bench.machine import machine_info
from app.cli import build_parser
from app.learners.build import build
from app.learners.noise_publish import SLOT_BUFFER, shows_published
from app.learners.noise_slots import bands_of, estimate_slot_noise
from app.learners.registry import learner_class
from app.learners.slot_refresh import SlotRefresh
from app.replay import rank as rank_replay
from app.sim.trust import placements

RESULTS = Path(__file__).resolve().parent / "results"
REQUESTS = 20_000
#: The estimator's defaults the bands are cut with (:func:`estimate_slot_noise`).
TOP, BOTTOM, RECENT = 0.2, 0.03, 0.7


def run(world: str, seed: int) -> dict[str, Any]:
    """One stream of ``world`` and what its last estimate's bands hold."""
    args = build_parser().parse_args(
        ["replay", "--task", "rank", "--dataset", "sim", "--rounds", str(REQUESTS),
         "--learn-batch", "100", "--seed", str(seed), *WORLDS[world]])
    sim = rank_replay.simulator(args, seed)
    params = {**learner_class("rank", "ridge_pl").service_defaults,
              "n_action_features": sim.n_action_features, "slots": sim.slots}
    learner = build("rank", "ridge_pl", n_features=sim.n_features, params=params, seed=seed)
    refresh = SlotRefresh(learner)
    rows = placements(sim, REQUESTS, seed=seed, learn_batch=100, learner=learner,
                      refresh=refresh)
    refresh.finish()
    theta, rho0, rho1 = sim.slot_noise()
    newest = slice(-SLOT_BUFFER, None)
    k, p, s, f, g = (c[newest] for c in (rows.slot, rows.prob, rows.score, rows.click,
                                        rows.relevance))
    est = estimate_slot_noise(k, p, s, f, sim.slots)
    start = k.shape[0] - math.ceil(RECENT * k.shape[0])
    keep = p[start:] < 1.0
    k, s, f, g = k[start:][keep], s[start:][keep], f[start:][keep], g[start:][keep]
    band, _ = bands_of(s, TOP, BOTTOM)
    slots = []
    for j in range(sim.slots):
        bottom, top = (band == 0) & (k == j), (band == 2) & (k == j)
        true_v = float(np.mean(theta[j] * (rho0[j] + g[bottom] * (1.0 - rho1 - rho0[j]))))
        low, high = est.rho0_interval[j]
        slots.append({
            "slot": j, "bottom_rows": int(bottom.sum()),
            "bottom_relevance": float(g[bottom].mean()), "bottom_click": float(f[bottom].mean()),
            "bottom_true_click": true_v,
            "bottom_click_bias": true_v - float(theta[j] * rho0[j]),
            "top_relevance": float(g[top].mean()),
            "rho0": float(est.rho0[j]), "rho0_interval": [float(low), float(high)],
            "rho0_true": float(rho0[j]),
            "holds_rho0": bool(low <= rho0[j] <= high),
            "holds_band_click": bool(low * theta[j] <= true_v <= high * theta[j])})
    outcomes = refresh.estimates
    kept = [any(o["status"] == "published" for o in outcomes[:i + 1])
            for i in range(len(outcomes))]
    return {"world": world, "seed": seed, "last_reason": est.reason or "published",
            "slots": slots, "refreshes": [[o["t"], o["reason"] or o["status"]]
                                          for o in outcomes],
            "shown_before": int(sum(kept)), "shown_after": int(sum(shows_published(outcomes))),
            "n_refreshes": len(outcomes)}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per world and slot: the bottom band's mean relevance and click bias, how often the
    last estimate's ``rho0_k`` interval held the parameter and the band's true click rate;
    the refreshes showing published rates before and with withdrawal."""
    out: dict[str, Any] = {}
    for w in dict.fromkeys(r["world"] for r in runs):
        mine = [r for r in runs if r["world"] == w]
        slots = len(mine[0]["slots"])
        out[w] = {
            "seeds": len(mine),
            "bottom_relevance": [[round(r["slots"][j]["bottom_relevance"], 4) for r in mine]
                                 for j in range(slots)],
            "bottom_click_bias": [[round(r["slots"][j]["bottom_click_bias"], 4) for r in mine]
                                  for j in range(slots)],
            "holds_rho0": [sum(r["slots"][j]["holds_rho0"] for r in mine)
                           for j in range(slots)],
            "holds_band_click": [sum(r["slots"][j]["holds_band_click"] for r in mine)
                                 for j in range(slots)],
            "refreshes": sum(r["n_refreshes"] for r in mine),
            "shown_before": sum(r["shown_before"] for r in mine),
            "shown_after": sum(r["shown_after"] for r in mine)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", default="flips50,trust8")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    started = time.process_time()
    runs = [run(w, s) for w in args.worlds.split(",") for s in range(args.seeds)]
    out = {"machine": machine_info(), "requests": REQUESTS, "summary": summary(runs),
           "runs": runs, "cpu_seconds": round(time.process_time() - started, 1)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "noise-bands.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    main()
