"""Replay runner of the ``noisy_input`` task: kernel OGD from noisy copies (paper P5).

Each round: the learner is scored on the **clean** instance (squared error
against the clean target, or the sign error for classification sets), then
decides from one noisy copy, asks for ``copies_needed`` more copies, and
learns from them with the target -- exactly what a client of the service
does.  The step is P5's ``eta/sqrt(T)`` with ``T`` the number of rounds
(``--schedule sqrt_t``: ``eta/sqrt(t)`` instead).

``extra`` holds ``copies_per_round`` (mean copies handed out per round,
including the one used to predict), ``queries_per_round`` (copies the
estimator consumed) with the paper's expectation ``p/(p-1)^2`` or
``3p/(p-1)^2``, the metric over the first and last 10% of rounds and their
ratio, and the support terms stored.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from app.learners.kernel_ogd import KernelOGD
from app.learners.kernels.functions import CLASSIFICATION_LOSSES, LOSSES, parse_kernel
from app.learners.registry import algorithms, build
from app.replay import task_of
from app.replay.result import ReplayResult, chance_error_rate
from app.sim.noisy_inputs import CopyOracle, load_noisy_input

DEFAULT_ROUNDS = 3000
DEFAULT_ETA = 0.33
CURVE_POINTS = 200
PROGRESS_STEP = 100


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the noisy-input replay (P5)."""
    group.add_argument("--kernel", default="gaussian:5",
                       help="linear | poly:DEG | exp | gaussian:SIGMA2 (default gaussian:5)")
    group.add_argument("--loss", choices=LOSSES, default=None,
                       help="default squared (regression) or smooth_hinge (classification)")
    group.add_argument("--input-noise", type=float, default=0.1, metavar="STD",
                       help="std of the Gaussian noise of each copy (default 0.1)")
    group.add_argument("--p", type=float, default=2.0,
                       help="geometric parameter p > 1 of the estimators (default 2)")
    group.add_argument("--eta", type=float, default=DEFAULT_ETA,
                       help=f"P5's eta: step eta/sqrt(T), T = rounds (default {DEFAULT_ETA})")
    group.add_argument("--schedule", choices=("horizon", "sqrt_t"), default="horizon",
                       help="step eta/sqrt(T) (horizon, default) or eta/sqrt(t)")
    group.add_argument("--norm-bound", type=float, default=100.0, metavar="B_W",
                       help="bound B_w on ||w||^2 (default 100)")
    group.add_argument("--gradient-order", choices=("fixed", "random"), default="fixed",
                       help="order C of the gradient estimate: fixed for the squared loss "
                            "(default) or P5's geometric draw")
    group.add_argument("--naive", action="store_true",
                       help="baseline: plain OGD on the single noisy copy used to predict")
    group.add_argument("--support-budget", type=int, default=1000, metavar="M",
                       help="max stored high-level support terms (default 1000)")
    group.add_argument("--explicit-dim", type=int, default=4096,
                       help="levels n with d^n <= this are stored exactly (default 4096)")
    group.add_argument("--no-centre", action="store_true",
                       help="keep generated inputs/targets raw (not centred/standardised)")


def learner_params(args: argparse.Namespace, rounds: int, classification: bool
                   ) -> dict[str, Any]:
    """KernelOGD hyper-parameters from the command line (step from P5's eta), then
    ``--params`` on top (learner hyper-parameters as they are, e.g. ``eta`` unscaled)."""
    horizon = args.schedule == "horizon"
    params = {"kernel": args.kernel,
              "loss": args.loss or ("smooth_hinge" if classification else "squared"),
              "p": args.p, "eta": args.eta / np.sqrt(rounds) if horizon else args.eta,
              "schedule": "constant" if horizon else "sqrt_t",
              "norm_bound": args.norm_bound, "naive": bool(args.naive),
              "gradient_order": args.gradient_order,
              "budget": args.support_budget, "explicit_dim": args.explicit_dim,
              } | dict(getattr(args, "params", None) or {})
    parse_kernel(params["kernel"])
    if (params["loss"] in CLASSIFICATION_LOSSES) != classification:
        kind = "classification" if classification else "regression"
        raise ValueError(f"loss {params['loss']!r} does not fit this {kind} data set")
    return params


def paper_expected_queries(kernel: str, p: float) -> float:
    """P5's expected queries per round: ``p/(p-1)^2``, or ``3p/(p-1)^2`` (Gaussian)."""
    return (3.0 if parse_kernel(kernel).gaussian else 1.0) * p / (p - 1.0) ** 2


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay ``args.dataset`` through ``kernel_ogd`` with a simulated copy oracle."""
    task = task_of(args, __name__)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    data = load_noisy_input(args.dataset, n=rounds, seed=seed, centre=not args.no_centre)
    X, y = data.X, data.y
    rounds = len(y)
    params = learner_params(args, rounds, data.classification)
    learner = build(task, algorithm, n_features=X.shape[1], params=params, seed=seed)
    if not isinstance(learner, KernelOGD):
        raise TypeError(f"{algorithm!r} is not a KernelOGD learner")
    oracle = CopyOracle(args.input_noise, np.random.default_rng([seed, 1]))

    err = np.empty(rounds)
    queries = 0
    for t in range(rounds):
        value = learner.predict(X[t])
        err[t] = (np.sign(value or 1.0) != y[t]) if data.classification else (value - y[t]) ** 2
        decision = learner.decide(oracle.copy(X[t]))
        k = learner.copies_needed(decision.context)
        queries += learner.queries_used(decision.context)
        learner.learn_one({**decision.context, "target": y[t], "copies": oracle.copies(X[t], k)})
        done = t + 1
        if done % PROGRESS_STEP == 0 or done == rounds:
            progress(done % PROGRESS_STEP or PROGRESS_STEP)

    running = np.cumsum(err) / np.arange(1, rounds + 1)
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    window = max(1, rounds // 10)
    first, last = float(err[:window].mean()), float(err[-window:].mean())
    metric = "error_rate" if data.classification else "mse"
    extra: dict[str, Any] = {
        "copies_per_round": oracle.queries / rounds,
        "queries_per_round": queries / rounds,
        "expected_queries": learner.expected_queries(),
        "paper_expected_queries": paper_expected_queries(params["kernel"], params["p"]),
        f"first_window_{metric}": first,
        f"final_window_{metric}": last,
        "window_ratio": last / first if first > 0 else float("nan"),
        "input_noise": args.input_noise,
        "support_terms": learner.support_terms(),
        "centred": not args.no_centre,
    }
    if data.classification:  # the sign of a two-class label
        extra["chance_error_rate"] = chance_error_rate(2)
    return ReplayResult(
        algorithm=algorithm + (" (naive)" if params["naive"] else ""),
        dataset=str(args.dataset),
        rounds=rounds,
        metric=metric,
        final=float(running[-1]),
        curve=[(int(t), float(running[t - 1])) for t in points],
        seed=seed,
        params=params,
        extra=extra,
    )
