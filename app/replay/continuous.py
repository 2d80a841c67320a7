"""Replay runner of the ``continuous`` task: a learner acting in a simulated world.

``--dataset pricing``: pricing the customers of the pricing world (:mod:`app.sim.pricing`),
purchases seen as clicks flipped with ``--rho0``/``--rho1``; the learner is told the true
rates unless ``--uncorrected`` (then it learns the raw revenue of the noisy purchases).
``--dataset regression``: dosing the contexts of the dose-response world
(:mod:`app.sim.response`), rewards measured with Gaussian noise (no click noise).

Decisions come in batches of ``--decision-batch`` made on one state, then learned in one
``learn_many`` (a service's batch predict and its trainer's batch).  The metric is the
share of the gap between a uniform and the best action closed by the actions played in the
first ``t`` rounds (exploration included; ``price_gap_closed`` for pricing, ``action_gap_closed``
for the regression world); ``extra`` holds the final policy's share on fresh contexts
(greedy and smoothed), the CPU seconds of the rounds, and the final greedy action against
the best of the first fresh contexts (``learned_actions``, the plot's second panel:
:mod:`app.replay.actions_plot`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from app.learners.registry import algorithms, build
from app.replay import task_of
from app.replay.actions_plot import learned_actions
from app.replay.result import ReplayResult
from app.sim.actions import ActionWorld, play
from app.sim.pricing import PricingWorld
from app.sim.response import ResponseWorld

DEFAULT_ROUNDS = 20_000
#: Options of the label task's group this runner reads.
SHARED_OPTIONS = ("rho0", "rho1")
#: The worlds by data set name, and the name of their metric.
WORLDS: dict[str, tuple[type[ActionWorld], str]] = {
    "pricing": (PricingWorld, "price_gap_closed"),
    "regression": (ResponseWorld, "action_gap_closed")}
DATASETS = tuple(WORLDS)


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the continuous replay."""
    group.add_argument("--decision-batch", type=int, default=10, metavar="B",
                       help="decisions made on one state before they are learned (default 10)")
    group.add_argument("--uncorrected", action="store_true",
                       help="do not tell the learner the click-noise rates")


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay the world of ``args.dataset`` through ``args.algorithm`` (default: the
    task's)."""
    task = task_of(args, __name__)
    if args.dataset not in DATASETS:
        raise ValueError(f"--dataset: the continuous task replays {list(DATASETS)}, "
                         f"not {args.dataset!r}")
    if args.decision_batch < 1:
        raise ValueError(f"--decision-batch: must be >= 1, got {args.decision_batch}")
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    kind, metric = WORLDS[args.dataset]
    world = kind()
    rho0, rho1 = getattr(args, "rho0", 0.0), getattr(args, "rho1", 0.0)
    if kind is ResponseWorld and (rho0 or rho1):
        raise ValueError("--rho0/--rho1: the regression world's rewards are measurements, "
                         "not clicks")
    told = (0.0, 0.0) if args.uncorrected else (rho0, rho1)
    params = {"action_range": list(world.action_range), "rho0": told[0], "rho1": told[1],
              **(getattr(args, "params", None) or {})}
    learner = build(task, algorithm, world.n_features, None, params, seed=seed)
    played = play(learner, world, rounds, seed, batch=args.decision_batch, rho0=rho0,
                  rho1=rho1, progress=progress)
    return ReplayResult(
        algorithm=algorithm, dataset=args.dataset, rounds=rounds, metric=metric,
        final=played.online, curve=played.curve, seed=seed, params=params,
        extra={"gap_closed_greedy": played.greedy, "gap_closed_smoothed": played.smoothed,
               "cpu_seconds_rounds": played.cpu_seconds, "rho0": rho0, "rho1": rho1,
               "uncorrected": bool(args.uncorrected),
               "learned_actions": learned_actions(*played.actions),
               "world": {k: v for k, v in vars(world).items()
                         if not isinstance(v, np.ndarray)}})
