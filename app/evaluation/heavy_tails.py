"""An interval for an importance-weighted value that holds whatever the weights' tails.

The percentile bootstrap of IPS (:mod:`app.evaluation.estimators`) covers
when many events carry the weight; when a few carry it (a ranking's slot
``k``, weighted by the product of ``k + 1`` inverse propensities, an
effective sample size of tens among thousands of rankings) the resamples
rarely see the rare large weights and the interval misses the value.

:func:`betting_interval` uses instead what is known of every event: the
click ``f_i`` lies in ``[0, 1]``, the weight ``w_i >= 0``, and the weights
of a logging policy that puts positive probability wherever the target does
have mean 1.  Then ``Y_i = w_i f_i >= 0`` has mean ``V`` and
``Z_i = w_i (1 - f_i) >= 0`` has mean ``1 - V``.  For a candidate mean
``m`` of a non-negative ``Y``, the capital of a bettor

    ``K(m) = prod_i (1 + lambda_i (Y_i - m))``,  ``0 <= lambda_i < 1 / m``,

with ``lambda_i`` fixed from the events before ``i`` only, is a
non-negative supermartingale when the mean is at most ``m``, so by Ville's
inequality it reaches ``2 / alpha`` with probability at most ``alpha / 2``
(Waudby-Smith & Ramdas 2023, *Estimating means of bounded random variables
by betting*, hedged capital with the predictable plug-in bet of their
section 5; applied to off-policy values by Karampatziakis, Mineiro & Ramdas
2021, *Off-policy confidence sequences*).  The lower end is the least ``m``
whose capital stays below ``2 / alpha`` (``K(m)`` decreases in ``m``, so a
bisection finds it); the upper end is one minus the lower end of ``Z``'s
mean.  The events are bet on in log order, so a logging policy that learns
as it goes keeps the guarantee.

:func:`guard_heavy_tails` applies it to an evaluation's result (of a
ranking's slot, of a label log, of one position of an OBD log): below
:data:`MIN_ESS` effective events the result is flagged
``insufficient_data`` with the reason, and each estimator's interval is
widened to hold the betting interval; :func:`guard_label` is that rule on
a label log's events (every log and task alike).  A ranking's slates sum
its slots' values, so when a slot is flagged :func:`guard_slates` flags them
too and widens their intervals to the sum of every slot's betting interval,
each at level ``1 - (1 - level) / m`` for ``m`` slots (then all hold
together with probability at least ``level``, Bonferroni).  Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from app.evaluation.estimators import ESTIMATORS, LabelLog, Options, importance_weights
from app.evaluation.rates import SlotRates
from app.evaluation.slates import SLATE_ESTIMATORS

#: Effective sample size (Kish) below which the bootstrap interval is not trusted.
MIN_ESS = 100.0
#: Largest share of the capital staked on one event (``lambda_i <= STAKE / m``).
STAKE = 0.75
#: Bisection steps per end (an end to within ``2**-40``).
STEPS = 40
#: Normal quantile of the rates' errors carried into a corrected interval (95%).
RATE_Z = 1.96


def _bets(y: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets ``sqrt(2 log(2 / alpha) / (n s_{i-1}^2))`` with the running
    variance ``s^2`` of the events before ``i`` (prior variance 1/4 and mean 1/2)."""
    n = len(y)
    seen = np.arange(1, n + 1)
    mean = (0.5 + np.cumsum(y)) / (seen + 1)
    before = np.r_[0.5, mean[:-1]]
    var = (0.25 + np.cumsum((y - before) ** 2)) / (seen + 1)
    var_before = np.r_[0.25, var[:-1]]
    out: np.ndarray = np.sqrt(2.0 * math.log(2.0 / alpha) / (n * var_before))
    return out


def _lower_end(y: np.ndarray, alpha: float) -> float:
    """The least mean ``m`` in ``[0, 1]`` of the non-negative ``y`` that the capital does not
    reject at ``alpha / 2`` (module docstring); 0 without events."""
    if len(y) == 0:
        return 0.0
    bets = _bets(y, alpha)
    threshold = math.log(2.0 / alpha)

    def rejected(m: float) -> bool:
        lam = np.minimum(bets, STAKE / m)
        return float(np.log1p(lam * (y - m)).sum()) >= threshold

    low, high = 0.0, 1.0
    if rejected(high):
        return 1.0
    for _ in range(STEPS):
        mid = (low + high) / 2
        if rejected(mid):
            low = mid
        else:
            high = mid
    return low


def betting_interval(w: np.ndarray, f: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """An interval holding ``V = E[w f]`` with probability at least ``level`` for clicks
    ``f`` in ``[0, 1]`` and weights ``w >= 0`` of mean 1, in log order (module docstring).

    >>> rng = np.random.default_rng(0)
    >>> w = np.where(rng.random(5_000) < 0.01, 100.0, 0.0)  # mean 1, a hundred heavy events
    >>> low, high = betting_interval(w, (rng.random(5_000) < 0.3).astype(float))
    >>> bool(low < 0.3 < high)
    True
    """
    alpha = 1.0 - level
    f = np.clip(np.asarray(f, dtype=np.float64), 0.0, 1.0)
    w = np.asarray(w, dtype=np.float64)
    return _lower_end(w * f, alpha), 1.0 - _lower_end(w * (1.0 - f), alpha)


def corrected_interval(low: float, high: float, rates: SlotRates | None
                       ) -> tuple[float, float]:
    """An interval of the raw click rate as one of the corrected reward, by ``rates`` (one
    slot's) over every corner of their 95% ranges when they carry errors
    (:meth:`~app.evaluation.rates.SlotRates.interval`); unchanged without rates."""
    return (low, high) if rates is None else rates.interval(low, high, RATE_Z)


def guard_heavy_tails(result: dict[str, Any], w: np.ndarray, f: np.ndarray,
                      level: float = 0.95, rates: SlotRates | None = None) -> dict[str, Any]:
    """``result`` (an :class:`~app.evaluation.estimators.Evaluation`'s dict on the weights
    ``w`` and raw clicks ``f``, corrected by ``rates``) as is when its ``ess`` reaches
    :data:`MIN_ESS`; else flagged ``insufficient_data`` with the reason, and each
    estimator's interval widened to hold :func:`betting_interval` (corrected like the
    result)."""
    if result["ess"] >= MIN_ESS:
        return result
    low, high = corrected_interval(*betting_interval(w, f, level), rates)
    return _widened(result, ESTIMATORS, low, high,
                    f"effective sample size {result['ess']:.0f} below {MIN_ESS:.0f}: the value "
                    "rests on a few heavily weighted events; each interval is widened to a "
                    "bound that holds whatever the weights")


def guard_slates(result: dict[str, Any], columns: list[tuple[np.ndarray, np.ndarray]],
                 rates: list[SlotRates | None], level: float = 0.95) -> dict[str, Any]:
    """A slates ``result`` (:class:`app.evaluation.slates.SlateEvaluation`'s dict) flagged
    ``insufficient_data`` and each interval widened to hold the sum of the slots' betting
    intervals (module docstring): ``columns`` and ``rates`` per slot, its weights and raw
    clicks in log order and the rates its clicks are corrected by."""
    each = 1.0 - (1.0 - level) / len(columns)
    ends = [corrected_interval(*betting_interval(w, f, each), r)
            for (w, f), r in zip(columns, rates, strict=True)]
    return _widened(result, SLATE_ESTIMATORS, sum(e[0] for e in ends), sum(e[1] for e in ends),
                    f"a slot's effective sample size is below {MIN_ESS:.0f}: each interval is "
                    "widened to the sum of the slots' bounds that hold whatever the weights")


def _widened(result: dict[str, Any], names: tuple[str, ...], low: float, high: float,
             reason: str) -> dict[str, Any]:
    """``result`` flagged ``insufficient_data`` with ``reason``, the interval of each
    estimator of ``names`` widened to hold ``[low, high]``."""
    out = {**result, "insufficient_data": True, "reason": reason}
    for name in names:
        est = result[name]
        out[name] = {**est, "ci_low": min(est["ci_low"], low),
                     "ci_high": max(est["ci_high"], high)}
    return out


def kish_ess(w: np.ndarray) -> float:
    """Kish's effective sample size of the weights ``w``, ``(sum w)^2 / sum w^2`` (0 without
    a positive weight)."""
    w2 = float(w @ w)
    return float(w.sum()) ** 2 / w2 if w2 > 0 else 0.0


def guard_slate_log(result: dict[str, Any], w: np.ndarray, f: np.ndarray,
                    rates: SlotRates | None, level: float = 0.95) -> dict[str, Any]:
    """A slate log's ``result`` (weights ``w`` and raw clicks ``f``, ``n x L``, in log
    order; ``rates`` of every slot or of one) as is when every slot's effective sample size
    reaches :data:`MIN_ESS`, else :func:`guard_slates` of it."""
    slots = w.shape[1]
    if min(kish_ess(w[:, k]) for k in range(slots)) >= MIN_ESS:
        return result
    each = [None if rates is None else rates.slot(k) for k in range(slots)]
    return guard_slates(result, [(w[:, k], f[:, k]) for k in range(slots)], each, level)


def label_columns(batches: Iterable[tuple[LabelLog, np.ndarray | None]]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The importance weights and raw clicks of a label log's events, over ``batches`` of
    events and their targets in log order."""
    ws, fs = [], []
    for log, target in batches:
        ws.append(importance_weights(log, target))
        fs.append(np.asarray(log.rewards, dtype=np.float64))
    return (np.concatenate(ws), np.concatenate(fs)) if ws else (np.zeros(0), np.zeros(0))


def guard_label(result: dict[str, Any], batches: Iterable[tuple[LabelLog, np.ndarray | None]],
                options: Options) -> dict[str, Any]:
    """:func:`guard_heavy_tails` of a label log's ``result`` (corrected by ``options``'
    rates), its weights and clicks read from ``batches`` (events and targets in log order)
    only when its ``ess`` is below :data:`MIN_ESS`."""
    if result["ess"] >= MIN_ESS:
        return result
    return guard_heavy_tails(result, *label_columns(batches), options.level, options.rates())
