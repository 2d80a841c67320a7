"""``noisyloop evaluate --format dsjson`` of a continuous-action (CATS) log: what Vowpal
Wabbit's ``--cats`` reads with ``--dsjson`` (:func:`app.sim.dsjson.read_cats`).

Each labelled line is a decision: its context's features, the action played, its density
under the logging policy (``pdf_value``) and its cost (the reward is ``-cost``, VW's
convention).  The value of a target policy's smoothed version is estimated by smoothed IPS,
SNIPS and DR (Kallus and Zhou 2018; :func:`app.evaluation.smoothed.smoothed_evaluation`,
the service's sums for a ``continuous`` log) with normal 95% intervals and the effective
sample size.  DR's reward model is the continuous task's
(:mod:`app.evaluation.smoothed_model`): ridge regression on the context's features (one
column per feature name, in order of first sight, as a CB dsjson log's shared features)
times Legendre features of the action, cross-fitted over two folds keyed by the line's
place (``--seed``), so that each event is predicted by a model fitted without its own
reward and DR stays unbiased whatever the model's fit.  The policies:

* ``uniform``: an action uniform over the action range, weight ``1 / ((hi - lo) pdf)``;
* ``logging``: the policy that wrote the log, weight 1 (the mean reward);
* ``fixed:V``: an action uniform over ``[V - h, V + h]`` clipped to the range.

A CATS log does not hold its action range (VW is told it with ``--min_value`` and
``--max_value``): ``--action-range LO HI`` gives it, else it is the logged actions' smallest
and largest (said in the result, ``action_range_from``: a uniform policy over a range
wider than the one logged is then read as one over the logged range).  ``h`` is
``--bandwidth`` (default: the range over 32, the service's default for ``ridge_ucb``).
The costs are not clicks: ``--rho0``/``--rho1`` are refused.
"""

from __future__ import annotations

import argparse
from typing import Any

#: Default smoothing half-width: the action range over this.
DEFAULT_BINS = 32


def cats_policy(text: str, lo: float, hi: float) -> float | str:
    """``uniform``, ``logging``, or the value of ``fixed:V`` (within ``[lo, hi]``)."""
    if text in ("uniform", "logging"):
        return text
    kind, _, value = text.partition(":")
    if kind == "fixed":
        try:
            fixed = float(value)
        except ValueError:
            fixed = float("nan")
        if lo <= fixed <= hi:
            return fixed
        if fixed == fixed:
            raise ValueError(f"--policy: fixed:{fixed:g} lies outside the action range "
                             f"[{lo:g}, {hi:g}]")
    raise ValueError(f"--policy: {text!r}: a CATS log is evaluated for uniform, logging or "
                     "fixed:VALUE (a number in the action range)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The result JSON (ValueError on bad input)."""
    import numpy as np

    from app.evaluation.smoothed import low_ess_flag, smoothed_evaluation
    from app.learners.smoothing import window
    from app.sim.dsjson import DsjsonCounts, read_cats
    from app.sim.logs import FeatureIndex

    if args.rho0 is not None or args.rho1 is not None:
        raise ValueError("--rho0/--rho1: a CATS log's costs are not clicks")
    if args.plot:
        raise ValueError("--plot: not drawn for a CATS log (the result holds the estimates)")
    counts = DsjsonCounts()
    decisions = list(read_cats(args.log, counts, skip_bad=args.skip_bad_lines))
    if not decisions:
        raise ValueError(f"{args.log}: no labelled decision")
    action = np.array([d.action for d in decisions])
    pdf = np.array([d.pdf for d in decisions])
    reward = -np.array([d.cost for d in decisions])
    given = args.action_range is not None
    lo, hi = (float(v) for v in args.action_range) if given else (action.min(), action.max())
    if not lo < hi:
        raise ValueError(f"--action-range: [{lo:g}, {hi:g}] is empty")
    if given and not np.all((action >= lo) & (action <= hi)):
        raise ValueError(f"--action-range: the log plays actions from {action.min():g} to "
                         f"{action.max():g}, outside [{lo:g}, {hi:g}]")
    h = (hi - lo) / DEFAULT_BINS if args.bandwidth is None else float(args.bandwidth)
    if not h > 0:
        raise ValueError(f"--bandwidth: must be > 0, got {h:g}")
    policy = cats_policy(args.policy, lo, hi)
    n = len(action)
    windows = (np.tile([lo, hi], (n, 1)) if policy == "uniform" else None
               if policy == "logging" else
               np.column_stack(window(np.full(n, float(policy)), lo, hi, h)))
    index = FeatureIndex(name for d in decisions for name in d.features)
    X = index.dense(d.features for d in decisions)
    value = smoothed_evaluation(X, action, pdf, reward, windows, (lo, hi), seed=args.seed)
    return {"n": value.n, "ess": value.ess, "low_ess": value.low_ess, **low_ess_flag(value),
            **{name: {"value": est.value, "ci_low": est.ci[0], "ci_high": est.ci[1]}
               for name, est in (("ips", value.ips), ("snips", value.snips),
                                 ("dr", value.dr))},
            "reward_model": {"features": len(index.columns), "folds": 2},
            "action_range": [float(lo), float(hi)],
            "action_range_from": "option" if given else "log", "bandwidth": h,
            "reward": "-cost", "log": str(args.log), "format": "dsjson", "kind": "cats",
            "policy": args.policy, "dsjson": counts.to_dict()}
