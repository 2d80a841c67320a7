"""The ``continuous`` learners beside Vowpal Wabbit's ``--cats`` on the pricing world.

Every learner prices the same customers of :class:`app.sim.pricing.PricingWorld` (20,000
by default, per seed), deciding one price and learning its outcome before the next
customer (VW's online loop; noisyloop's learners through
:func:`app.sim.pricing.play` with ``batch=1``, and with ``batch=10``: ten decisions on one
state, then one ``learn_many``, as a service's batch predict and its trainer do).
Reported per run: the share of the gap between the uniform and the best price closed by
the prices played (``online``, exploration included) and by the final policy on fresh
customers (``smoothed``: the exploring policy, as served; ``greedy`` for noisyloop), and
rounds (decide + learn, the
world's draws included, the same for all; the scoring excluded) per CPU second of this
process.  The compiled kernels are loaded before the runs (:func:`app.learners.jit.warm`, as
a worker does at start), as VW's workspace is built before its rounds.

Vowpal Wabbit (the ``bench`` extra) runs through its Python binding with the settings of
its continuous-actions tutorial (``--cats 32 --coin --epsilon 0.2 -q ::``, a bandwidth of
one of 32 units of the range), and with ``--epsilon 0.05``; its cost is minus the revenue,
the example text is built per round (part of using VW from Python).  Under noisy purchases
(``--rho0 0.05 --rho1 0.3``) VW is run on the raw revenue and on the noise-corrected one
(``price (click - rho0) / (1 - rho0 - rho1)``, what noisyloop's learners compute).

Usage::

    .venv/bin/python bench/bench_continuous.py                  # clean, 3 seeds
    .venv/bin/python bench/bench_continuous.py --rho0 0.05 --rho1 0.3

Writes ``bench/results/continuous[_noisy].json`` (one record per run) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.learners import jit
from app.learners.registry import build
from app.sim.pricing import SCORED, PricingWorld, play

RESULTS = Path(__file__).resolve().parent / "results"
#: Decisions noisyloop's learners make on one state before learning them (1: VW's loop; 10:
#: a service's batch of predicts and its trainer's batch).
BATCHES = (1, 10)


@dataclass
class Run:
    learner: str
    seed: int
    rounds: int
    online: float
    smoothed: float
    greedy: float | None
    rounds_per_cpu_second: float


def noisyloop_run(algorithm: str, world: PricingWorld, rounds: int, seed: int,
                  rho0: float, rho1: float, batch: int) -> Run:
    learner = build("continuous", algorithm, world.n_features, None,
                    {"action_range": list(world.price_range), "rho0": rho0, "rho1": rho1},
                    seed=seed)
    played = play(learner, world, rounds, seed, batch=batch, rho0=rho0, rho1=rho1)
    return Run(f"{algorithm}, batch {batch}", seed, rounds, played.online, played.smoothed,
               played.greedy, rounds / played.cpu_seconds)


def _text(x: np.ndarray) -> str:
    return "| " + " ".join(f"x{j}:{v:.9g}" for j, v in enumerate(x))


def vw_run(name: str, args: str, world: PricingWorld, rounds: int, seed: int, rho0: float,
           rho1: float, corrected: bool) -> Run:
    """VW's ``--cats`` through the same customers and draws as :func:`play`."""
    import vowpalwabbit

    lo, hi = world.price_range
    vw: Any = vowpalwabbit.Workspace(f"{args} --min_value {lo} --max_value {hi} --quiet "
                                     f"--random_seed {seed}")
    rng = np.random.default_rng(seed)
    X = world.customers(rounds, rng)
    earned = np.empty(rounds)
    start = time.process_time()
    for t in range(rounds):
        text = _text(X[t])
        price, pdf = vw.predict(text)
        earned[t] = world.revenue(X[t:t + 1], np.array([price]))[0]
        click = world.purchases(X[t:t + 1], np.array([price]), rng, rho0, rho1)[0]
        reward = price * ((click - rho0) / (1.0 - rho0 - rho1) if corrected else click)
        vw.learn(f"ca {price}:{-reward}:{pdf} {text}")
    cpu = time.process_time() - start
    fresh = world.customers(SCORED, rng)
    served = np.array([vw.predict(_text(x))[0] for x in fresh])
    vw.finish()
    return Run(name, seed, rounds, world.gap_closed(X, earned),
               world.gap_closed(fresh, world.revenue(fresh, served)), None, rounds / cpu)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rho0", type=float, default=0.0)
    ap.add_argument("--rho1", type=float, default=0.0)
    args = ap.parse_args(argv)
    world = PricingWorld()
    lo, hi = world.price_range
    unit = (hi - lo) / 32
    vw_settings = {
        "vw --cats (tutorial, epsilon 0.2)":
            f"--cats 32 --bandwidth {unit} --coin --epsilon 0.2 -q ::",
        "vw --cats (epsilon 0.05)": f"--cats 32 --bandwidth {unit} --coin --epsilon 0.05 -q ::",
    }
    noisy = args.rho0 > 0 or args.rho1 > 0
    jit.warm()
    runs: list[Run] = []
    for seed in args.seeds:
        for algorithm in ("ridge_ucb", "cats"):
            for batch in BATCHES:
                runs.append(noisyloop_run(algorithm, world, args.rounds, seed, args.rho0,
                                          args.rho1, batch))
        for name, vw_args in vw_settings.items():
            for corrected in ((False, True) if noisy else (False,)):
                label = name + (", corrected reward" if corrected else "")
                runs.append(vw_run(label, vw_args, world, args.rounds, seed, args.rho0,
                                   args.rho1, corrected))
        for run in runs[-(2 * len(BATCHES) + len(vw_settings) * (2 if noisy else 1)):]:
            print(f"seed {seed} {run.learner:45s} online {run.online:.3f} smoothed "
                  f"{run.smoothed:.3f} rounds/CPU-s {run.rounds_per_cpu_second:,.0f}",
                  flush=True)
    out = RESULTS / f"continuous{'_noisy' if noisy else ''}.json"
    out.write_text(json.dumps({"rounds": args.rounds, "rho0": args.rho0, "rho1": args.rho1,
                               "world": {k: v for k, v in asdict(world).items()
                                         if k != "direction"},
                               "runs": [asdict(r) for r in runs]}, indent=1))
    print("| learner | online gap closed | final policy | rounds per CPU second |\n"
          "| --- | --- | --- | --- |")
    for name in dict.fromkeys(r.learner for r in runs):
        mine = [r for r in runs if r.learner == name]
        print(f"| {name} | {np.mean([r.online for r in mine]):.3f} | "
              f"{np.mean([r.smoothed for r in mine]):.3f} | "
              f"{np.mean([r.rounds_per_cpu_second for r in mine]):,.0f} |")


if __name__ == "__main__":
    main()
