"""Replay runner of the ``continuous`` task: a learner pricing the customers of the pricing
world (:mod:`app.sim.pricing`), purchases seen as clicks flipped with ``--rho0``/``--rho1``.

``--dataset pricing`` is the one data set.  Decisions come in batches of
``--decision-batch`` made on one state, then learned in one ``learn_many`` (a service's
batch predict and its trainer's batch).  The metric is ``price_gap_closed``: the share of the gap
between the uniform and the best price closed by the prices played in the first ``t``
rounds (exploration included); ``extra`` holds the final policy's share on fresh customers
(greedy and smoothed) and the CPU seconds of the rounds.  The learner is told the true
rates unless ``--uncorrected`` (then it learns the raw revenue of the noisy purchases).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict

from app.learners.registry import algorithms, build
from app.replay import task_of
from app.replay.result import ReplayResult
from app.sim.pricing import PricingWorld, play

DEFAULT_ROUNDS = 20_000
#: Options of the label task's group this runner reads.
SHARED_OPTIONS = ("rho0", "rho1")
DATASETS = ("pricing",)


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the continuous replay."""
    group.add_argument("--decision-batch", type=int, default=10, metavar="B",
                       help="decisions made on one state before they are learned (default 10)")
    group.add_argument("--uncorrected", action="store_true",
                       help="do not tell the learner the click-noise rates")


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay the pricing world through ``args.algorithm`` (default: the task's)."""
    task = task_of(args, __name__)
    if args.dataset not in DATASETS:
        raise ValueError(f"--dataset: the continuous task replays {list(DATASETS)}, "
                         f"not {args.dataset!r}")
    if args.decision_batch < 1:
        raise ValueError(f"--decision-batch: must be >= 1, got {args.decision_batch}")
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    world = PricingWorld()
    rho0, rho1 = getattr(args, "rho0", 0.0), getattr(args, "rho1", 0.0)
    told = (0.0, 0.0) if args.uncorrected else (rho0, rho1)
    params = {"action_range": list(world.price_range), "rho0": told[0], "rho1": told[1],
              **(getattr(args, "params", None) or {})}
    learner = build(task, algorithm, world.n_features, None, params, seed=seed)
    played = play(learner, world, rounds, seed, batch=args.decision_batch, rho0=rho0,
                  rho1=rho1, progress=progress)
    return ReplayResult(
        algorithm=algorithm, dataset=args.dataset, rounds=rounds, metric="price_gap_closed",
        final=played.online, curve=played.curve, seed=seed, params=params,
        extra={"gap_closed_greedy": played.greedy, "gap_closed_smoothed": played.smoothed,
               "cpu_seconds_rounds": played.cpu_seconds, "rho0": rho0, "rho1": rho1,
               "uncorrected": bool(args.uncorrected),
               "world": {k: v for k, v in asdict(world).items() if k != "direction"}})
