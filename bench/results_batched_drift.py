"""False drift alarms under batched traffic, and the delay of a real change: in process.

The three-banner world of :mod:`app.sim.banners` (3 banners, ``x = [u1, u2, u3, 1]``,
true click rates 0.2 / 0.45 / 0.7 moved by ``0.15 (u1 - 0.5)``, clicks flipped with
rho0 0.1, rho1 0.2), ``linucb_diag``, decisions in batches made on one state, the
batch learned at once, the model's drift detector and its ``recover`` step as the
service runs them (:func:`app.sim.banners.serve_batches`).  Runs:

* ``stationary``: ``--events`` stationary events per batch size; the alarms (each
  one a refit of the model) and the share of plays of the best banner;
* ``change``: the rates reversed after 20,000 events (the best banner becomes the
  worst); the delay of the first alarm after the change and the true click rate of
  the plays 2,500-7,500 events after it (stationary: about 0.68).

Each run is made at the current defaults (``half_life`` null, the stratified
detector) and as before (``half_life`` 700, every event in one stratum).

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/results_batched_drift.py \\
        --events 1000000 --json bench/results/drift/batched.json

Prints one JSON line per run; ``--json`` writes them all.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from app.bench.results import write_results
from app.learners.config import ModelConfig
from app.sim.banners import BannerWorld, serve_batches

CHANGE_AT = 20_000
SETTINGS = {"now": ({}, True), "before": ({"half_life": 700.0}, False)}


def config(params: dict[str, Any]) -> ModelConfig:
    """The ``linucb_diag`` model of the world, with ``params`` over the defaults."""
    return ModelConfig.of({"model_id": "banners", "task": "label", "algorithm": "linucb_diag",
                           "n_features": 4, "n_classes": 3, "params": params, "seed": 0})


def stationary(setting: str, batch: int, events: int, seed: int) -> dict[str, Any]:
    params, strata = SETTINGS[setting]
    started = time.monotonic()
    served = serve_batches(config(params), BannerWorld(), events, batch, seed, strata=strata)
    return {"run": "stationary", "setting": setting, "params": params, "strata": strata,
            "batch": batch, "events": events, "seed": seed, "alarms": len(served.detections),
            "detections": served.detections[:50], "since": served.since[:50],
            "best_share": round(float(served.best.mean()), 4),
            "true_click_rate": round(float(served.reward.mean()), 4),
            "seconds": round(time.monotonic() - started, 1)}


def change(setting: str, batch: int, seed: int) -> dict[str, Any]:
    params, strata = SETTINGS[setting]
    served = serve_batches(config(params), BannerWorld(change_at=CHANGE_AT), CHANGE_AT + 7_500,
                           batch, seed, strata=strata)
    after = [d for d in served.detections if d > CHANGE_AT]
    return {"run": "change", "setting": setting, "params": params, "strata": strata,
            "batch": batch, "seed": seed,
            "false_alarms": len(served.detections) - len(after),
            "delay": after[0] - CHANGE_AT if after else None,
            "true_click_rate_after": round(float(
                served.reward[CHANGE_AT + 2_500:CHANGE_AT + 7_500].mean()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batches", default="1000,500,100,1")
    parser.add_argument("--settings", default="now,before")
    parser.add_argument("--runs", default="change,stationary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = []
    for run in args.runs.split(","):
        for setting in args.settings.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                out.append(change(setting, batch, args.seed) if run == "change"
                           else stationary(setting, batch, args.events, args.seed))
                print(json.dumps(out[-1]), flush=True)
    if args.json:
        write_results(args.json, out)


if __name__ == "__main__":
    main()
