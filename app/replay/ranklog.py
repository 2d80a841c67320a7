"""Replay of a ``rank`` learner over a logged data set (``--dataset vw:PATH`` or ``obd:PATH``).

The offline replay method of Li, Chu, Langford & Wang (2011, *Unbiased
offline evaluation of contextual-bandit-based news article recommendation
algorithms*): in log order the learner ranks the logged candidates for the
logged context; when its slot-0 choice is the logged slot-0 item the event
is *kept*: its slot-0 reward counts and the learner learns the event's
clicks (as a decision context of its own for the logged ranking,
``follow_ranking``, the way a trainer feeds it logged plays); else the
event is skipped and the learner never sees it.

Non-uniform logging: each event first passes a rejection step with
probability ``p_min / p`` (``p``: the logging probability of the slot-0
item, ``p_min``: the smallest in the replayed log; always 1 for uniform
logging).  An event is then kept with probability ``sum_a pi(a | x) p(a |
x) p_min / p(a | x) = p_min`` whatever the context and the learner's
history, and given that it is kept its slot-0 item is the learner's draw
``a ~ pi(. | x)``: the kept events are an i.i.d. stream of contexts with
the learner's own choices, so the learner's rewards (and what it learns)
are distributed as in an online run of that many events.  Weighting the
kept rewards by ``1 / p`` instead would estimate the mean reward but let
the learner learn from a stream skewed toward the contexts where it agrees
with the logger.

Layouts.  ``vw:PATH``: one decision per labelled ADF example (unlabelled
ones are dropped), one slot, reward ``-cost`` (a click logged as cost -1),
context the shared features, candidates the example's actions.
``obd:PATH`` (``item_context.csv`` beside it): candidates are every item
(features ``item_feature_*``), context the user's ``user_feature_*`` and
``user-item_affinity_*`` cells.  With ``slate_id`` the rows of a slate are
one decision over all positions (learned with every position's click; the
slot-0 propensity is that of the position-0 row); without it every row is
a one-slot decision with its position one-hot (``position=k``) in the
context.  Every context gets a constant feature.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from app.learners.base import CandidateRanker, ParamError, stack_events
from app.learners.offpolicy import learn_finite
from app.learners.registry import algorithms, build
from app.replay.result import ReplayResult
from app.sim.logs import FeatureIndex, Named, read_obd, read_obd_items, read_vw_adf

#: Points of the curve (the rank replay's resolution) and rounds between progress reports.
CURVE_POINTS = 100
PROGRESS_STEP = 1_000
#: Prefixes of ``--dataset`` that name a log, and its layout.
LAYOUTS = ("vw", "obd")
#: Options of the rank replay that only set up the simulator.
SIM_OPTIONS = ("candidates", "slots", "position_bias", "click_noise", "trust", "binary",
               "churn", "churn_every", "context_features", "action_features")


@dataclass(frozen=True)
class LoggedRankings:
    """A log as the replay reads it, one entry per decision."""

    X: np.ndarray
    """Contexts, ``n x d_x`` (the constant first)."""
    candidates: list[np.ndarray]
    """Candidate features per decision (``n_t x d_a``)."""
    rankings: list[list[int]]
    """The logged ranking: rows of the candidates, slot order."""
    clicks: list[np.ndarray]
    """The logged reward of each slot of the ranking, in ``[0, 1]``."""
    propensity: np.ndarray
    """Logging probability of the slot-0 item."""
    slots: int
    layout: str


def is_log(dataset: str) -> bool:
    """Whether ``--dataset`` names a log (``vw:PATH`` or ``obd:PATH``)."""
    kind, sep, path = dataset.partition(":")
    return bool(sep and path) and kind in LAYOUTS


def _contexts(rows: list[Named]) -> np.ndarray:
    index = FeatureIndex(["constant"])
    index.add(name for row in rows for name in row)
    return index.dense({**row, "constant": 1.0} for row in rows)


def _check_rewards(path: str, clicks: list[np.ndarray], hint: str) -> None:
    bad = next((i for i, c in enumerate(clicks) if not ((c >= 0.0) & (c <= 1.0)).all()), None)
    if bad is not None:
        raise ValueError(f"{path}: decision {bad + 1} has rewards {clicks[bad].tolist()} "
                         f"outside [0, 1] ({hint})")


def vw_rankings(path: str) -> LoggedRankings:
    """The labelled examples of a VW ADF file as one-slot decisions (ValueError on bad input)."""
    examples = [e for e in read_vw_adf(path) if e.logged is not None]
    if not examples:
        raise ValueError(f"{path}: no labelled example")
    actions = FeatureIndex(name for e in examples for a in e.actions for name in a)
    if not actions.columns:
        raise ValueError(f"{path}: the actions have no features")
    clicks = [np.array([-float(cast(float, e.cost))]) for e in examples]
    _check_rewards(path, clicks, "the reward is -cost: log a click as cost -1")
    return LoggedRankings(
        X=_contexts([e.shared for e in examples]),
        candidates=[actions.dense(e.actions) for e in examples],
        rankings=[[cast(int, e.logged)] for e in examples], clicks=clicks,
        propensity=np.array([e.probability for e in examples], dtype=np.float64),
        slots=1, layout="vw")


def obd_rankings(path: str) -> LoggedRankings:
    """An OBD log CSV (``item_context.csv`` beside it) as decisions over every item: one per
    slate with ``slate_id``, else one per row (ValueError on bad input)."""
    items = read_obd_items(Path(path).parent / "item_context.csv")
    ids = sorted(items)
    column = {item: k for k, item in enumerate(ids)}
    index = FeatureIndex(name for item in ids for name in items[item])
    if not index.columns:
        raise ValueError(f"{path}: item_context.csv has no item_feature_* column")
    A = index.dense(items[item] for item in ids)
    records = list(read_obd(path))
    if not records:
        raise ValueError(f"{path}: no rows")
    unknown = sorted({r.item_id for r in records} - set(column))
    if unknown:
        raise ValueError(f"{path}: item ids {unknown[:5]} not in item_context.csv")
    if records[0].slate is None:
        clicks = [np.array([r.click]) for r in records]
        _check_rewards(path, clicks, "clicks")
        return LoggedRankings(
            X=_contexts([{**r.context, f"position={r.position}": 1.0} for r in records]),
            candidates=[A] * len(records), rankings=[[column[r.item_id]] for r in records],
            clicks=clicks, propensity=np.array([r.propensity for r in records]),
            slots=1, layout="obd rows")
    slots = max(r.position for r in records) + 1
    slates: dict[str, dict[int, Any]] = {}
    for r in records:
        slates.setdefault(str(r.slate), {})[r.position] = r
    incomplete = [s for s, rows in slates.items() if len(rows) != slots]
    if incomplete or len(records) != slots * len(slates):
        raise ValueError(f"{path}: every slate needs one row per position (slates "
                         f"{incomplete[:5] or 'with repeated positions'})")
    ordered = [[rows[k] for k in range(slots)] for rows in slates.values()]
    clicks = [np.array([r.click for r in rows]) for rows in ordered]
    _check_rewards(path, clicks, "clicks")
    return LoggedRankings(
        X=_contexts([rows[0].context for rows in ordered]), candidates=[A] * len(ordered),
        rankings=[[column[r.item_id] for r in rows] for rows in ordered], clicks=clicks,
        propensity=np.array([rows[0].propensity for rows in ordered]), slots=slots,
        layout="obd slates")


def load(dataset: str) -> LoggedRankings:
    """The log ``--dataset`` names (ParamError naming ``--dataset`` on a bad path or file)."""
    kind, _, path = dataset.partition(":")
    try:
        log = vw_rankings(path) if kind == "vw" else obd_rankings(path)
    except (OSError, ValueError, KeyError) as exc:
        detail = f"missing column {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ParamError("--dataset", f"cannot replay {kind} log {path!r}: {detail}") from None
    if not (np.isfinite(log.propensity).all() and (log.propensity > 0.0).all()
            and (log.propensity <= 1.0).all()):
        raise ParamError("--dataset", f"{path}: logging probabilities must lie in (0, 1]")
    return log


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the simulator's options (a log sets its own candidates, slots, features)."""
    defaults = getattr(args, "_defaults", {})
    for dest in SIM_OPTIONS:
        if dest in defaults and getattr(args, dest) != defaults[dest]:
            raise ParamError("--" + dest.replace("_", "-"), f"sets up the simulator; a log "
                             f"({args.dataset}) brings its own (give learner settings, "
                             "e.g. rho0/rho1, in --params)")
    if getattr(args, "estimator", None) is not None:
        raise ParamError("--estimator", "a log's replay estimates no click noise (its clicks "
                         "are the log's; the simulator's replay runs the estimator)")
    if args.learn_batch < 1:
        raise ParamError("--learn-batch", f"must be >= 1, got {args.learn_batch}")


def run(args: argparse.Namespace, task: str, seed: int,
        progress: Callable[[int], None]) -> ReplayResult:
    """Replay ``args.algorithm`` (default: ``task``'s first) over the log of ``args.dataset``
    (the first ``--rounds`` decisions, default all; module docstring).  The rank replay
    (:func:`app.replay.rank.run`) calls it for a ``--dataset`` that names a log."""
    _check_options(args)
    log = load(args.dataset)
    algorithm = getattr(args, "algorithm", None) or algorithms(task)[0]
    n = min(len(log.rankings), getattr(args, "rounds", None) or len(log.rankings))
    d_a = log.candidates[0].shape[1]
    params: dict[str, Any] = {"n_action_features": d_a, "slots": log.slots,
                              **dict(getattr(args, "params", None) or {})}
    if params["slots"] != log.slots:
        raise ParamError("--params", f"slots: the log's decisions fill {log.slots} slots")
    learner = build(task, algorithm, n_features=log.X.shape[1], params=params, seed=seed)
    if not (learner.ranks_candidates and learner.follows_baseline):
        raise ParamError("--algorithm", f"{algorithm!r} cannot learn a logged ranking")
    ranker = cast(CandidateRanker, learner)
    p_min = float(log.propensity[:n].min())
    accept = p_min / log.propensity[:n]
    draws = np.random.default_rng([seed, 1]).random(n)
    rewards = np.full(n, np.nan)
    pending: list[dict[str, np.ndarray]] = []
    for t in range(n):
        if draws[t] < accept[t]:
            x, A, logged = log.X[t], log.candidates[t], log.rankings[t]
            pick = ranker.decide(x, True, actions=A).output["ranking"][0]["index"]
            if pick == logged[0]:
                rewards[t] = log.clicks[t][0]
                clicks = np.zeros(log.slots)
                clicks[:len(logged)] = log.clicks[t]
                own = ranker.follow_ranking(x, logged, actions=A, slots=len(logged))
                pending.append({**own.context, "clicks": clicks})
        if pending and (len(pending) == args.learn_batch or t == n - 1):
            learn_finite(learner, stack_events(pending))
            pending = []
        if (t + 1) % PROGRESS_STEP == 0 or t == n - 1:
            progress((t + 1) % PROGRESS_STEP or PROGRESS_STEP)
    kept = ~np.isnan(rewards)
    values = rewards[kept]
    count = np.cumsum(kept)
    total = np.cumsum(np.where(kept, rewards, 0.0))
    points = np.unique(np.linspace(1, n, min(CURVE_POINTS, n)).astype(int))
    curve = [(int(p), float(total[p - 1] / count[p - 1]) if count[p - 1] else float("nan"))
             for p in points]
    quarter = max(1, len(values) // 4)
    extra = {
        "kept_events": int(kept.sum()), "log_events": n, "kept_share": float(kept.mean()),
        "kept_reward_first_quarter": float(values[:quarter].mean()) if len(values) else None,
        "kept_reward_last_quarter": float(values[-quarter:].mean()) if len(values) else None,
        "kept_reward_se": (float(values.std() / np.sqrt(len(values)))
                           if len(values) > 1 else None),
        "acceptance": "uniform" if accept.min() == 1.0 else "rejection p_min / p",
        "p_min": p_min, "layout": log.layout, "slots": log.slots,
        "context_features": int(log.X.shape[1]), "action_features": int(d_a),
        "candidates_mean": float(np.mean([len(c) for c in log.candidates[:n]])),
        "learn_batch": args.learn_batch,
    }
    return ReplayResult(
        algorithm=algorithm, dataset=str(args.dataset), rounds=n, metric="kept_reward",
        final=float(values.mean()) if len(values) else float("nan"), curve=curve, seed=seed,
        params=params, extra=extra)
