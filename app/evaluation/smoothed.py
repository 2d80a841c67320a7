"""Off-policy values of continuous-action policies: smoothed IPS, SNIPS and DR.

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
the windows.  Doubly robust (Kallus & Zhou 2018, Section 3, with a reward model ``q``
cross-fitted on the log, :mod:`app.evaluation.smoothed_model`):

    V_DR = (1/n) sum_i [qbar_i + w_i (r_i - q(x_i, a_i))],

``qbar_i`` the mean of ``q(x_i, .)`` over the target's window; unbiased for ``V_h`` whatever
``q`` (fitted apart from the event's own reward), and the closer ``q`` to the reward the
smaller its variance.  Without a model (``q = 0``) DR is IPS.  The logging policy's DR is
the mean reward.

Intervals are normal: ``V_IPS +- z s / sqrt(n)`` with ``s`` the sample standard deviation
of ``w_i r_i``; DR's alike with its terms (the influence function); SNIPS by the delta
method, ``s`` that of ``w_i (r_i - V_SNIPS) / mean(w)``.  The effective sample size
``ESS = (sum w)^2 / sum w^2`` says how many events the estimate rests on; below
:data:`~app.evaluation.heavy_tails.MIN_ESS`, as for every other log, the result is flagged
``low_ess``.

A target policy is given to the sums as its window per event, ``n x 2`` ends ``[a_i, b_i]``
(the uniform policy: the whole range), or None for the logging policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.evaluation.heavy_tails import MIN_ESS
from app.evaluation.smoothed_model import SmoothedRewardModel, SmoothedRidgeSums
from app.evaluation.sums import fold_of, row_hash, row_keys
from app.learners.smoothing import window

#: Normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """One estimator's value and 95% interval."""

    value: float
    ci: tuple[float, float]


@dataclass(frozen=True)
class SmoothedValue:
    """IPS, SNIPS and DR of one target policy on one log."""

    n: int
    ips: Estimate
    snips: Estimate
    dr: Estimate
    ess: float
    low_ess: bool


def smoothed_weights(action: np.ndarray, pdf: np.ndarray, centre: np.ndarray,
                     action_range: tuple[float, float], h: float) -> np.ndarray:
    """``w_i`` of the module docstring for target centres ``centre`` (one per event)."""
    lo, hi = action_range
    return window_weights(action, pdf, *window(centre, lo, hi, h))


def window_weights(action: np.ndarray, pdf: np.ndarray, a: np.ndarray,
                   b: np.ndarray) -> np.ndarray:
    """``w_i`` of the module docstring for target windows ``[a_i, b_i]``."""
    out: np.ndarray = ((action >= a) & (action <= b)) / ((b - a) * pdf)
    return out


def folds_of(keys: np.ndarray, seed: int, folds: int) -> np.ndarray:
    """The cross-fitting fold of each event, from its key (its position in the log)."""
    return fold_of(row_hash(keys, seed), folds)


def reward_sums(X: np.ndarray, action: np.ndarray, reward: np.ndarray, keys: np.ndarray,
                action_range: tuple[float, float], folds: int, seed: int) -> SmoothedRidgeSums:
    """The reward model's sums of a batch (the first pass)."""
    sums = SmoothedRidgeSums.zeros(folds, X.shape[1], action_range)
    sums.add(X, action, reward, folds_of(keys, seed, folds))
    return sums


def _normal(value: float, squares: float, n: int) -> Estimate:
    """``value +- z s / sqrt(n)`` with ``s^2 = squares / (n - 1)`` (``squares``: the sum of
    the squared deviations of the terms)."""
    half = Z95 * float(np.sqrt(max(squares, 0.0) / (n - 1) / n)) if n > 1 else float("inf")
    return Estimate(value, (value - half, value + half))


@dataclass
class SmoothedSums:
    """The sums the estimators need, mergeable (``a`` and ``b`` summed separately and merged
    give the sums of both): ``n``, ``sum w``, ``sum w^2``, ``sum w r``, ``sum (w r)^2``,
    ``sum w^2 r`` and DR's terms' ``sum psi`` and ``sum psi^2``.  SNIPS's squared
    deviations are ``(n / sum w)^2 (sum (w r)^2 - 2 S sum w^2 r + S^2 sum w^2)``."""

    n: int = 0
    w: float = 0.0
    w2: float = 0.0
    wr: float = 0.0
    wr2: float = 0.0
    w2r: float = 0.0
    dr: float = 0.0
    dr2: float = 0.0

    def add_weighted(self, w: np.ndarray, reward: np.ndarray,
                     dr_terms: np.ndarray | None = None) -> None:
        """Add events with weights ``w``, rewards ``reward`` and DR's terms (None: IPS's,
        ``w r``, a model ``q = 0``)."""
        wr = w * reward
        psi = wr if dr_terms is None else dr_terms
        self.n += int(w.shape[0])
        self.w += float(w.sum())
        self.w2 += float((w * w).sum())
        self.wr += float(wr.sum())
        self.wr2 += float((wr * wr).sum())
        self.w2r += float((w * wr).sum())
        self.dr += float(psi.sum())
        self.dr2 += float((psi * psi).sum())

    def add_log(self, X: np.ndarray, action: np.ndarray, pdf: np.ndarray,
                reward: np.ndarray, windows: np.ndarray | None, keys: np.ndarray,
                model: SmoothedRewardModel, seed: int, folds: int) -> None:
        """Add a batch's events for the target of ``windows`` (``n x 2``; None: the logging
        policy) with the cross-fitted ``model`` (the second pass)."""
        if windows is None:
            self.add_weighted(np.ones(len(reward)), reward)
            return
        a, b = windows[:, 0], windows[:, 1]
        w = window_weights(action, pdf, a, b)
        self.add_weighted(w, reward, model.dr_terms(X, action, reward, w, a, b,
                                                    folds_of(keys, seed, folds)))

    def merge(self, other: SmoothedSums) -> None:
        self.n += other.n
        self.w += other.w
        self.w2 += other.w2
        self.wr += other.wr
        self.wr2 += other.wr2
        self.w2r += other.w2r
        self.dr += other.dr
        self.dr2 += other.dr2

    def value(self) -> SmoothedValue:
        """IPS, SNIPS and DR with their intervals and the ESS (module docstring)."""
        n = self.n
        ips = self.wr / n
        ips_squares = self.wr2 - n * ips * ips
        dr = self.dr / n
        if self.w > 0:
            snips = self.wr / self.w
            snips_squares = (n / self.w) ** 2 * (self.wr2 - 2 * snips * self.w2r
                                                 + snips * snips * self.w2)
            ess = self.w * self.w / self.w2
        else:
            snips, snips_squares, ess = float("nan"), float("nan"), 0.0
        return SmoothedValue(n, _normal(ips, ips_squares, n),
                             _normal(snips, snips_squares, n),
                             _normal(dr, self.dr2 - n * dr * dr, n), ess, ess < MIN_ESS)


def smoothed_value(action: np.ndarray, pdf: np.ndarray, reward: np.ndarray,
                   centre: np.ndarray, action_range: tuple[float, float],
                   h: float) -> SmoothedValue:
    """Smoothed IPS and SNIPS of the policy with ``centre`` per event (module docstring;
    DR without a reward model, equal to IPS: :func:`smoothed_evaluation` fits one).

    >>> est = smoothed_value(np.array([0.5, 2.0]), np.array([0.1, 0.1]),
    ...                      np.array([1.0, 3.0]), np.array([0.5, 0.5]), (0.0, 10.0), 1.0)
    >>> round(est.ips.value, 12), est.snips.value  # only the first event is in [0, 1.5]
    (3.333333333333, 1.0)
    """
    sums = SmoothedSums()
    sums.add_weighted(smoothed_weights(action, pdf, centre, action_range, h), reward)
    return sums.value()


def smoothed_evaluation(X: np.ndarray, action: np.ndarray, pdf: np.ndarray,
                        reward: np.ndarray, windows: np.ndarray | None,
                        action_range: tuple[float, float], folds: int = 2, ridge: float = 1.0,
                        seed: int = 0, keys: np.ndarray | None = None) -> SmoothedValue:
    """Smoothed IPS, SNIPS and DR of the target with ``windows`` (module docstring) on one
    log held in memory: the service's two passes (the reward model's sums, then the
    estimators'), the events keyed by ``keys`` (None: their positions)."""
    keys = row_keys(np.arange(len(reward))) if keys is None else keys
    model = reward_sums(X, action, reward, keys, action_range, folds, seed).fit(ridge)
    sums = SmoothedSums()
    sums.add_log(X, action, pdf, reward, windows, keys, model, seed, folds)
    return sums.value()
