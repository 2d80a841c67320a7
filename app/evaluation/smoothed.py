"""Off-policy values of continuous-action policies: smoothed IPS and SNIPS.

A log of the ``continuous`` task holds per event the context, the action ``a_i`` played,
its density ``p_i`` under the logging policy (``pdf``) and the reward ``r_i``.  A target
policy ``pi`` names a centre ``c(x)`` per context (``fixed:VALUE``: the same centre for
all); its *smoothed* version plays uniformly over the window ``W(c) = [c - h, c + h]``
clipped to the range (:mod:`app.learners.smoothing` with no uniform share).  Its value
``V_h(pi) = E_x[(1/|W(c(x))|) int_W E[r | x, a] da]`` has the kernel-smoothed importance
weights of Kallus & Zhou (2018), "Policy Evaluation and Optimization with Continuous
Treatments" (AISTATS), Section 3, with the boxcar kernel normalised over the clipped window:

    w_i = 1[a_i in W(c(x_i))] / (|W(c(x_i))| p_i),
    V_IPS   = (1/n) sum_i w_i r_i,
    V_SNIPS = sum_i w_i r_i / sum_i w_i.

Both are unbiased (SNIPS consistent) for ``V_h`` when the logging density is positive over
the windows.  Intervals are normal: ``V_IPS +- z s / sqrt(n)`` with ``s`` the sample
standard deviation of ``w_i r_i``; SNIPS by the delta method, ``s`` that of
``w_i (r_i - V_SNIPS) / mean(w)``.  The effective sample size
``ESS = (sum w)^2 / sum w^2`` says how many events the estimate rests on; below
:data:`MIN_ESS` the result is flagged ``low_ess``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.learners.smoothing import window

#: Normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054
#: Effective sample size below which an estimate is flagged (as the label task's).
MIN_ESS = 30.0


@dataclass(frozen=True)
class Estimate:
    """One estimator's value and 95% interval."""

    value: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class SmoothedValue:
    """IPS and SNIPS of one target policy on one log."""

    n: int
    ips: Estimate
    snips: Estimate
    ess: float
    low_ess: bool


def smoothed_weights(action: np.ndarray, pdf: np.ndarray, centre: np.ndarray,
                     action_range: tuple[float, float], h: float) -> np.ndarray:
    """``w_i`` of the module docstring for target centres ``centre`` (one per event)."""
    lo, hi = action_range
    a, b = window(centre, lo, hi, h)
    out: np.ndarray = ((action >= a) & (action <= b)) / ((b - a) * pdf)
    return out


def _normal(value: float, terms: np.ndarray) -> Estimate:
    n = terms.shape[0]
    half = Z95 * float(np.std(terms, ddof=1)) / np.sqrt(n) if n > 1 else float("inf")
    return Estimate(value, (value - half, value + half))


def smoothed_value(action: np.ndarray, pdf: np.ndarray, reward: np.ndarray,
                   centre: np.ndarray, action_range: tuple[float, float],
                   h: float) -> SmoothedValue:
    """Smoothed IPS and SNIPS of the policy with ``centre`` per event (module docstring).

    >>> est = smoothed_value(np.array([0.5, 2.0]), np.array([0.1, 0.1]),
    ...                      np.array([1.0, 3.0]), np.array([0.5, 0.5]), (0.0, 10.0), 1.0)
    >>> round(est.ips.value, 12), est.snips.value  # only the first event is in [0, 1.5]
    (3.333333333333, 1.0)
    """
    w = smoothed_weights(action, pdf, centre, action_range, h)
    n = w.shape[0]
    ips = float(np.mean(w * reward))
    total = float(w.sum())
    snips = float((w * reward).sum() / total) if total > 0 else float("nan")
    ess = total * total / float((w * w).sum()) if total > 0 else 0.0
    snips_terms = w * (reward - snips) / (total / n) if total > 0 else np.full(n, np.nan)
    return SmoothedValue(n, _normal(ips, w * reward), _normal(snips, snips_terms + snips),
                         ess, ess < MIN_ESS)
