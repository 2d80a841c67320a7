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


def _normal(value: float, squares: float, n: int) -> Estimate:
    """``value +- z s / sqrt(n)`` with ``s^2 = squares / (n - 1)`` (``squares``: the sum of
    the squared deviations of the terms)."""
    half = Z95 * float(np.sqrt(max(squares, 0.0) / (n - 1) / n)) if n > 1 else float("inf")
    return Estimate(value, (value - half, value + half))


@dataclass
class SmoothedSums:
    """The sums the estimators need, mergeable (``a`` and ``b`` summed separately and merged
    give the sums of both): ``n``, ``sum w``, ``sum w^2``, ``sum w r``, ``sum (w r)^2`` and
    ``sum w^2 r``.  SNIPS's squared deviations are
    ``(n / sum w)^2 (sum (w r)^2 - 2 S sum w^2 r + S^2 sum w^2)``."""

    n: int = 0
    w: float = 0.0
    w2: float = 0.0
    wr: float = 0.0
    wr2: float = 0.0
    w2r: float = 0.0

    def add_weighted(self, w: np.ndarray, reward: np.ndarray) -> None:
        """Add events with weights ``w`` and rewards ``reward``."""
        wr = w * reward
        self.n += int(w.shape[0])
        self.w += float(w.sum())
        self.w2 += float((w * w).sum())
        self.wr += float(wr.sum())
        self.wr2 += float((wr * wr).sum())
        self.w2r += float((w * wr).sum())

    def merge(self, other: SmoothedSums) -> None:
        self.n += other.n
        self.w += other.w
        self.w2 += other.w2
        self.wr += other.wr
        self.wr2 += other.wr2
        self.w2r += other.w2r

    def value(self) -> SmoothedValue:
        """IPS and SNIPS with their intervals and the ESS (module docstring)."""
        n = self.n
        ips = self.wr / n
        ips_squares = self.wr2 - n * ips * ips
        if self.w > 0:
            snips = self.wr / self.w
            snips_squares = (n / self.w) ** 2 * (self.wr2 - 2 * snips * self.w2r
                                                 + snips * snips * self.w2)
            ess = self.w * self.w / self.w2
        else:
            snips, snips_squares, ess = float("nan"), float("nan"), 0.0
        return SmoothedValue(n, _normal(ips, ips_squares, n),
                             _normal(snips, snips_squares, n), ess, ess < MIN_ESS)


def smoothed_value(action: np.ndarray, pdf: np.ndarray, reward: np.ndarray,
                   centre: np.ndarray, action_range: tuple[float, float],
                   h: float) -> SmoothedValue:
    """Smoothed IPS and SNIPS of the policy with ``centre`` per event (module docstring).

    >>> est = smoothed_value(np.array([0.5, 2.0]), np.array([0.1, 0.1]),
    ...                      np.array([1.0, 3.0]), np.array([0.5, 0.5]), (0.0, 10.0), 1.0)
    >>> round(est.ips.value, 12), est.snips.value  # only the first event is in [0, 1.5]
    (3.333333333333, 1.0)
    """
    sums = SmoothedSums()
    sums.add_weighted(smoothed_weights(action, pdf, centre, action_range, h), reward)
    return sums.value()
