"""Replay runner of the ``regression`` task: ORS / NLMS with simulated noisy labels.

Each round: the learner predicts ``ŷ`` for ``x_t`` (scored against the clean
target), one noisy label ``ỹ = y_t + N(0, v_t)`` is drawn with ``v_t`` from
the noise schedule, the label-budget strategy may ask for ``k - 1`` more
labels, and the learner learns from all of them (with ``variance = v_t``
under ``--known-variance``, else ``NaN``).  The metric is the running mean
squared error against the clean target (paper §2); ``extra`` holds the
labels used, the MSE of the last 10% of rounds and, for budgets above 1, the
trace of the running budget (and ``a`` for the auto strategies) every 100
rounds (paper Fig. 7).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from app.learners.budget import STRATEGIES, TUNE_BLOCK, AutoBudget, make_budget
from app.learners.ors import ALPHA_RULES, DEFAULT_R, K_VARIANCES
from app.learners.registry import algorithms, build
from app.replay import task_of
from app.replay.result import ReplayResult
from app.sim.regression import NOISE_SCHEDULES, draw_labels, load_regression, noise_variances

DEFAULT_ROUNDS = 10_000
CURVE_POINTS = 200
PROGRESS_STEP = 1_000


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the regression replay (ORS paper §4)."""
    group.add_argument("--noise-variance-max", type=float, default=1.0, metavar="M",
                       help="label-noise variance drawn per round from [0, M] (default 1)")
    group.add_argument("--noise-schedule", choices=NOISE_SCHEDULES, default="uniform",
                       help="per-round variance: uniform in [0, M], or linear ramp")
    group.add_argument("--alpha-rule", choices=ALPHA_RULES, default=None,
                       help="ORS scaling rule (default pred)")
    group.add_argument("--beta", type=float, default=None, help="beta of rule (6)")
    group.add_argument("--r", type=float, default=None,
                       help=f"regulariser r of ORS/NLMS (default {DEFAULT_R:g})")
    group.add_argument("--k-variance", choices=K_VARIANCES, default=None,
                       help="variance estimate of a k-label mean, unknown variance")
    group.add_argument("--budget", type=float, default=1.0, metavar="B",
                       help="average noisy labels per round (default 1)")
    group.add_argument("--budget-strategy", choices=STRATEGIES, default="auto_self_tuned",
                       help="how the budget is spent (default auto_self_tuned)")
    group.add_argument("--budget-a", type=float, default=1.0,
                       help="parameter a of the 'auto' strategy")
    group.add_argument("--known-variance", action="store_true",
                       help="send the per-round noise variance with the feedback")


def learner_params(args: argparse.Namespace, algorithm: str) -> dict[str, Any]:
    """Hyper-parameters given on the command line that ``algorithm`` accepts, then
    ``--params`` on top (as the label runner does)."""
    given = {"r": getattr(args, "r", None)}
    if algorithm == "ors":
        given |= {"alpha_rule": getattr(args, "alpha_rule", None),
                  "beta": getattr(args, "beta", None),
                  "k_variance": getattr(args, "k_variance", None)}
    return ({name: value for name, value in given.items() if value is not None}
            | dict(getattr(args, "params", None) or {}))


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay ``args.dataset`` through ``args.algorithm`` (default ``ors``)."""
    task = task_of(args, __name__)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    dataset = args.dataset
    X, y = load_regression(dataset, n=rounds, seed=seed)
    rounds = len(y)
    rng = np.random.default_rng([seed, 1])
    variances = noise_variances(rounds, args.noise_variance_max, rng, args.noise_schedule)
    params = learner_params(args, algorithm)
    learner = build(task, algorithm, n_features=X.shape[1], params=params, seed=seed)
    strategy = make_budget(args.budget_strategy, args.budget, a=args.budget_a,
                           horizon=rounds, seed=seed)
    known = bool(args.known_variance)

    sq_err = np.empty(rounds)
    trace: list[dict[str, float]] = []
    for t in range(rounds):
        decision = learner.decide(X[t])
        prediction = float(decision.output["value"])
        sq_err[t] = (prediction - y[t]) ** 2
        first = draw_labels(y[t], variances[t], 1, rng)
        extra = strategy.labels_wanted(float(first[0]), prediction)
        values = np.concatenate([first, draw_labels(y[t], variances[t], extra, rng)])
        learner.learn_one({**decision.context, "values": values,
                           "variance": variances[t] if known else np.nan})
        done = t + 1
        if strategy.k > 1 and done % TUNE_BLOCK == 0:
            point = {"t": done, "running_budget": strategy.labels_used / done}
            if isinstance(strategy, AutoBudget):
                point["a"] = strategy.a
            trace.append(point)
        if done % PROGRESS_STEP == 0 or done == rounds:
            progress(done % PROGRESS_STEP or PROGRESS_STEP)

    running = np.cumsum(sq_err) / np.arange(1, rounds + 1)
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    tail = max(1, rounds // 10)
    extra_fields: dict[str, Any] = {
        "labels_used": strategy.labels_used,
        "labels_per_round": strategy.labels_used / rounds,
        "final_window_mse": float(sq_err[-tail:].mean()),
        "noise_variance_max": args.noise_variance_max,
        "noise_schedule": args.noise_schedule,
        "known_variance": known,
        "budget": strategy.budget,
        "budget_strategy": strategy.strategy,
    }
    if trace:
        extra_fields["budget_trace"] = trace
    return ReplayResult(
        algorithm=algorithm,
        dataset=str(dataset),
        rounds=rounds,
        metric="mse",
        final=float(running[-1]),
        curve=[(int(t), float(running[t - 1])) for t in points],
        seed=seed,
        params={name: getattr(learner, name) for name in ("r", *params)},
        extra=extra_fields,
    )
