"""Replay runner of the ``rank`` task: a learner over the simulated recommender stream.

``--dataset sim`` is :class:`app.sim.rank.RankSimulator`; ``vw:PATH`` and
``obd:PATH`` replay a log instead (:mod:`app.replay.ranklog`).  Each round the
learner ranks the request's candidates, the simulator clicks the shown slots
under position bias and click noise, and the learner learns the clicks (in
batches of ``--learn-batch`` rounds decided with the same model, as a trainer
applies delayed feedback).  The metric is the share of the gap between a random
ranking and the oracle that the *played* rankings close
(:func:`app.sim.rank.gap_closed`, values weighted by the true position bias);
the curve gives it over the last :data:`WINDOW` rounds at each point,
``final`` over the last ``min(5000, rounds / 6)`` rounds.  ``extra`` holds the
greedy ranking's share, the position bias the learner uses (and its source)
against the truth, and the correlation between the scores of items that came
in by churn and their true relevance, when each is a candidate for the first
time (scored from its features alone).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from app.learners.base import ParamError, stack_events
from app.learners.registry import algorithms, build
from app.replay import task_of
from app.replay.drift import drift_report, schedule
from app.replay.result import ReplayResult
from app.sim.rank import DEFAULT_RHO, DEFAULT_THETA, RankSimulator, gap_closed

DATASETS = ("sim",)
DEFAULT_ROUNDS = 30_000
FINAL_ROUNDS = 5_000
WINDOW = 1_000
CURVE_POINTS = 100
PROGRESS_STEP = 1_000


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") \
            from None


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """Options of the rank replay (the simulator's setting)."""
    group.add_argument("--candidates", type=int, default=20, help="candidates per request")
    group.add_argument("--slots", type=int, default=3, help="slots per ranking")
    group.add_argument("--position-bias", type=_floats, default=DEFAULT_THETA,
                       metavar="T0,T1,...", help="true examination probability per slot")
    group.add_argument("--click-noise", type=_floats, default=DEFAULT_RHO, metavar="RHO0,RHO1",
                       help="true click noise (given to the learner as its rates)")
    group.add_argument("--churn", type=float, default=0.1,
                       help="share of the catalogue replaced every --churn-every rounds")
    group.add_argument("--churn-every", type=int, default=1_000, help="churn period in rounds")
    group.add_argument("--context-features", type=int, default=8,
                       help="context features (the constant 1 included)")
    group.add_argument("--action-features", type=int, default=8, help="action features")
    group.add_argument("--learn-batch", type=int, default=1, metavar="B",
                       help="learn in batches of B rounds decided with the same model")


def simulator(args: argparse.Namespace, seed: int) -> RankSimulator:
    """The simulator of ``args`` (ParamError naming the option on a bad setting)."""
    if args.dataset not in DATASETS:
        raise ParamError("--dataset", f"the rank task replays {DATASETS}, vw:PATH or "
                         f"obd:PATH, not {args.dataset!r}")
    if len(args.click_noise) != 2:
        raise ParamError("--click-noise", "give two rates, RHO0,RHO1")
    if len(args.position_bias) != args.slots:
        raise ParamError("--position-bias", f"give one value per slot ({args.slots})")
    if args.learn_batch < 1:
        raise ParamError("--learn-batch", f"must be >= 1, got {args.learn_batch}")
    try:
        return RankSimulator(
            n_features=args.context_features, n_action_features=args.action_features,
            n_candidates=args.candidates, slots=args.slots, churn=args.churn,
            churn_every=args.churn_every, theta=tuple(args.position_bias),
            rho0=args.click_noise[0], rho1=args.click_noise[1], seed=seed,
            drift=schedule(args))
    except ValueError as exc:
        raise ParamError("--dataset", f"simulator setting: {exc}") from None


def default_rounds(args: argparse.Namespace) -> int | None:
    """Rounds a run takes without ``--rounds``: a log's length is unknown until it is read."""
    from app.replay.ranklog import is_log

    return None if is_log(args.dataset) else DEFAULT_ROUNDS


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay the simulator (or the log of ``vw:PATH`` / ``obd:PATH``) through
    ``args.algorithm`` (default: the task's first)."""
    from app.replay import ranklog

    if ranklog.is_log(args.dataset):
        return ranklog.run(args, seed, progress)
    task = task_of(args, __name__)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    sim = simulator(args, seed)
    params: dict[str, Any] = {"n_action_features": sim.n_action_features, "slots": sim.slots,
                              "rho0": sim.rho0, "rho1": sim.rho1,
                              **dict(getattr(args, "params", None) or {})}
    learner = build(task, algorithm, n_features=sim.n_features, params=params, seed=seed)
    values = np.zeros((rounds, 5))  # played, oracle, random, greedy, click in slot 0
    new_scores: list[tuple[float, float]] = []
    pending: list[dict[str, np.ndarray]] = []
    for t in range(rounds):
        request = sim.request()
        decision = learner.decide(request.x, actions=request.actions)  # type: ignore[call-arg]
        ranking = np.array([r["index"] for r in decision.output["ranking"]])
        values[t, :3] = sim.values(request, ranking)
        values[t, 3] = sim.values(request, np.array(decision.output["greedy"]))[0]
        if t >= sim.churn_every and request.new.any():
            scores = learner.scores(request.x, request.actions)  # type: ignore[attr-defined]
            new_scores += zip(scores[request.new], request.relevance[request.new], strict=True)
        clicks = sim.clicks(request, ranking)
        values[t, 4] = clicks[0]
        pending.append({**decision.context, "clicks": clicks})
        if len(pending) == args.learn_batch or t == rounds - 1:
            learner.learn_many(stack_events(pending))
            pending = []
        if (t + 1) % PROGRESS_STEP == 0 or t == rounds - 1:
            progress((t + 1) % PROGRESS_STEP or PROGRESS_STEP)
    tail = slice(rounds - max(1, min(FINAL_ROUNDS, rounds // 6)), rounds)
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    curve = [(int(p), gap_closed(*values[max(0, p - WINDOW):p, :3].T)) for p in points]
    theta, source = learner.position_bias_estimate()  # type: ignore[attr-defined]
    extra = {
        "final_rounds": tail.stop - tail.start,
        "gap_closed_greedy": gap_closed(values[tail, 3], values[tail, 1], values[tail, 2]),
        "position_bias": [float(v) for v in theta],
        "position_bias_source": source,
        "position_bias_true": sim.theta.tolist(),
        "position_bias_max_error": float(np.abs(theta - sim.theta).max()),
        "new_item_score_correlation": (float(np.corrcoef(np.array(new_scores).T)[0, 1])
                                       if len(new_scores) > 2 else None),
        "new_items_scored": len(new_scores),
        "rho0": sim.rho0, "rho1": sim.rho1, "candidates": sim.n_candidates,
        "slots": sim.slots, "churn": sim.churn, "churn_every": sim.churn_every,
        "learn_batch": args.learn_batch,
    }
    if sim.drift.kind != "none":
        extra |= drift_report(sim.drift, values[:, 0], values[:, 1], values[:, 2], values[:, 4])
    return ReplayResult(
        algorithm=algorithm, dataset=str(args.dataset), rounds=rounds, metric="gap_closed",
        final=gap_closed(*values[tail, :3].T), curve=curve, seed=seed,
        params={k: v for k, v in params.items() if k not in ("rho0", "rho1")}, extra=extra)

