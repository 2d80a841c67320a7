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
greedy ranking's share and the correlation between the scores of items that came
in by churn and their true relevance, when each is a candidate for the first
time (scored from its features alone).

The model is the one a service would hold: its ``service_defaults``, and its
click noise estimated by the service's estimator (``--estimator``, default
``anchor``: the per-slot estimate run by :class:`~app.learners.slot_refresh.SlotRefresh` on
its shown slots, by the service's schedule and publish rule; once published the
learner learns affine-corrected clicks).  ``--estimator fixed`` gives the
learner the ``--click-noise`` rates instead.  ``extra`` reports every estimate
(``noise_estimates``, the last as ``noise_estimate``: status, reason, per-slot
``slots``), the position bias a service shows
(:func:`~app.learners.noise_publish.position_bias`) and the per-slot truth of the
stream (:meth:`~app.sim.rank.RankSimulator.slot_noise`) with the error of the
estimate in force (of its published values: examination alone until the whole
estimate is published).  ``--trust`` simulates trust bias (the per-slot estimate's own
click model); the default click-noise flips also click unexamined items, a
model the per-slot one covers only with the equivalent parameters reported as
the truth, and graded relevance breaks its anchors (``--binary`` does not).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from app.learners.base import Learner, ParamError, stack_events
from app.learners.noise_publish import position_bias, slots_outcome
from app.learners.registry import algorithms, build, learner_class
from app.learners.slot_refresh import SlotRefresh
from app.replay import ranklog, task_of
from app.replay.drift import drift_report, schedule
from app.replay.noise import estimator_of
from app.replay.result import ReplayResult
from app.sim.rank import DEFAULT_RHO, DEFAULT_THETA, RankSimulator, gap_closed

DATASETS = ("sim",)
DEFAULT_ROUNDS = 30_000
FINAL_ROUNDS = 5_000
WINDOW = 1_000
CURVE_POINTS = 100
PROGRESS_STEP = 1_000
#: Options of the label replay's group that the rank replay reads too.
SHARED_OPTIONS = ("estimator",)


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
                       help="true click noise: flips of the true click (given to the learner "
                            "as its rates with --estimator fixed)")
    group.add_argument("--trust", type=_floats, default=None, metavar="R0,R1,...",
                       help="trust bias instead of flips: an examined irrelevant item is "
                            "clicked with R_k in slot k, nothing unexamined is clicked, an "
                            "examined relevant item is not clicked with --click-noise's RHO1")
    group.add_argument("--binary", action="store_true",
                       help="binary relevance (1 where the true logit is positive)")
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
    trust = getattr(args, "trust", None)
    if trust is not None and (len(trust) != args.slots or not all(0.0 <= r < 1.0
                                                                    for r in trust)):
        raise ParamError("--trust", f"give one rate in [0, 1) per slot ({args.slots})")
    try:
        return RankSimulator(
            n_features=args.context_features, n_action_features=args.action_features,
            n_candidates=args.candidates, slots=args.slots, churn=args.churn,
            churn_every=args.churn_every, theta=tuple(args.position_bias),
            rho0=args.click_noise[0], rho1=args.click_noise[1], seed=seed,
            drift=schedule(args), trust=None if trust is None else tuple(trust),
            binary=bool(getattr(args, "binary", False)))
    except ValueError as exc:
        raise ParamError("--dataset", f"simulator setting: {exc}") from None


def default_rounds(args: argparse.Namespace) -> int | None:
    """Rounds a run takes without ``--rounds``: a log's length is unknown until it is read."""
    return None if ranklog.is_log(args.dataset) else DEFAULT_ROUNDS


def run(args: argparse.Namespace, seed: int, progress: Callable[[int], None]) -> ReplayResult:
    """Replay the simulator (or the log of ``vw:PATH`` / ``obd:PATH``) through
    ``args.algorithm`` (default: the task's first)."""
    task = task_of(args, __name__)
    if ranklog.is_log(args.dataset):
        return ranklog.run(args, task, seed, progress)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    sim = simulator(args, seed)
    cls = learner_class(task, algorithm)
    params: dict[str, Any] = {**cls.service_defaults, "n_action_features": sim.n_action_features,
                              "slots": sim.slots, **dict(getattr(args, "params", None) or {})}
    estimator = estimator_of(args, task, algorithm, params)
    if estimator == "fixed":
        params = {"rho0": sim.rho0, "rho1": sim.rho1} | params
    learner = build(task, algorithm, n_features=sim.n_features, params=params, seed=seed)
    refresh = SlotRefresh(learner) if estimator == "anchor" else None
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
            batch = stack_events(pending)
            learner.learn_many(batch)
            if refresh is not None:
                refresh.observe(batch)
            pending = []
        if (t + 1) % PROGRESS_STEP == 0 or t == rounds - 1:
            progress((t + 1) % PROGRESS_STEP or PROGRESS_STEP)
    tail = slice(rounds - max(1, min(FINAL_ROUNDS, rounds // 6)), rounds)
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    curve = [(int(p), gap_closed(*values[max(0, p - WINDOW):p, :3].T)) for p in points]
    if refresh is not None:
        refresh.finish()
    extra = {
        "final_rounds": tail.stop - tail.start,
        "final_over": final_over(tail.stop - tail.start, rounds),
        "gap_closed_greedy": gap_closed(values[tail, 3], values[tail, 1], values[tail, 2]),
        "new_item_score_correlation": (float(np.corrcoef(np.array(new_scores).T)[0, 1])
                                       if len(new_scores) > 2 else None),
        "new_items_scored": len(new_scores),
        "candidates": sim.n_candidates, "slots": sim.slots, "churn": sim.churn,
        "churn_every": sim.churn_every, "learn_batch": args.learn_batch,
        **noise_report(sim, learner, params, estimator, refresh),
    }
    if sim.drift.kind != "none":
        extra |= drift_report(sim.drift, values[:, 0], values[:, 1], values[:, 2], values[:, 4])
    return ReplayResult(
        algorithm=algorithm, dataset=str(args.dataset), rounds=rounds, metric="gap_closed",
        final=gap_closed(*values[tail, :3].T), curve=curve, seed=seed,
        params={k: v for k, v in params.items() if k not in ("rho0", "rho1")}, extra=extra)


def final_over(final_rounds: int, rounds: int) -> str:
    """What ``final`` is the mean over, in words (the rule that set ``final_rounds``)."""
    return (f"the last {final_rounds:,} of {rounds:,} rounds (min({FINAL_ROUNDS:,}, "
            f"rounds / 6), so that a final value leaves out the learning's start)")


def noise_report(sim: RankSimulator, learner: Learner, params: dict[str, Any], estimator: str,
                 refresh: SlotRefresh | None) -> dict[str, Any]:
    """The run's click-noise fields of ``extra`` (module docstring): the stream's truth in
    the per-slot model (``rho0``/``rho1``: slot 0's, the truth of the estimates' ``rho0`` and
    ``rho1``), the estimates, the position bias a service shows with its error, and each
    slot's error ``estimate - truth`` of the estimate in force (None without one)."""
    theta, rho0, rho1 = sim.slot_noise()
    in_force = None if refresh is None or refresh.in_force is None else slots_outcome(
        refresh.in_force)
    shown, source = position_bias(type(learner), params, in_force)
    out: dict[str, Any] = {
        "estimator": estimator,
        "click_model": "flips" if sim.trust is None else "trust",
        "binary_relevance": sim.binary,
        "click_noise": [sim.rho0, sim.rho1] if sim.trust is None else None,
        "trust": None if sim.trust is None else sim.trust.tolist(),
        "rho0": float(rho0[0]), "rho1": rho1,
        "slot_noise_true": [{"slot": k, "theta": float(theta[k]), "rho0": float(rho0[k]),
                             "rho1": rho1} for k in range(sim.slots)],
        "position_bias": shown,
        "position_bias_source": source,
        "position_bias_true": sim.theta.tolist(),
        "position_bias_max_error": float(np.abs(np.array(shown) - sim.theta).max()),
        "slot_noise_error": None if in_force is None else [
            {"slot": k} | {name: row[name] - truth for name, truth in
                           (("theta", theta[k]), ("rho0", rho0[k]), ("rho1", rho1))
                           if row["published"][name]}
            for k, row in enumerate(in_force)],
    }
    if refresh is not None:
        out["noise_estimates"] = refresh.estimates
        out["noise_estimate"] = refresh.estimates[-1] if refresh.estimates else None
    return out
