"""Forgetting for the ridge learners: a half-life in events on their sufficient statistics.

A learner built with ``half_life = h`` (events) weighs the event learned
``s`` events ago by ``gamma^s`` with ``gamma = 2^(-1/h)``: an event counts half
after ``h`` further events, and the statistics hold about ``h / ln 2``
events' worth of data (:func:`effective_count`).  ``half_life = None`` keeps
every event at weight 1 (``gamma = 1``), the learners' behaviour without
forgetting.

This is the discounted ridge regression of D-LinUCB (Russac, Vernade & Cappe
2019, *Weighted Linear Bandits for Non-Stationary Environments*, Algorithm 1,
Theorem 1):

    V_t  = sum_s gamma^(t-s)   x_s x_s^T + lambda I
    V~_t = sum_s gamma^(2(t-s)) x_s x_s^T + lambda I
    b_t  = sum_s gamma^(t-s)   r_s x_s,         theta_t = V_t^-1 b_t,

and the confidence width of a prediction ``theta_t . x`` is
``sqrt(x^T V_t^-1 V~_t V_t^-1 x)`` (the weighted least-squares estimate's
variance: the weights ``gamma^(t-s)`` enter once in ``V_t`` and squared in
``V~_t``).  With ``gamma = 1`` both matrices are the ridge Gram matrix and the
width is LinUCB's ``sqrt(x^T V^-1 x)``.  The regularisation stays ``lambda``
as the data fade (the paper's ``lambda`` times ``gamma^-t`` in its
unnormalised weights), so a model left without events returns to its prior
width rather than to a singular system.

Time is the model's event count: every event ages every arm's statistics, so
an arm that is no longer played sees its width grow back and is explored
again, as in D-LinUCB whose per-arm models are the blocks of one model on
``e_a (x) x``.  The learners age an arm lazily, when it is next used, by
``gamma`` to the power of the events since (:func:`decay`): the same
numbers as ageing every arm at every event, in ``O(K)`` per decision.

Forgetting is meaningful where a learner's state is a sum over events that a
weight can fade (the ridge learners and ``ridge_pl``).  The papers'
perceptron-style learners (``rcine``, ``rcnbf``, ``banditron``, ``soba``,
``bpa``, ``perceptron``) keep a weight vector moved by mistakes, not a sum of
statistics: it follows a changed world at the speed of its mistakes already,
and a decay of it would only shrink the margins.
"""

from __future__ import annotations

import math

import numpy as np

from app.learners.base import ParamError

#: Largest half-life accepted (events); beyond it ``gamma`` rounds to 1 in float64 sums.
MAX_HALF_LIFE = 1e12


def check_half_life(value: float | None) -> float | None:
    """``half_life`` in events, ``>= 1``, or None (never forget); else :class:`ParamError`.

    >>> check_half_life(None), check_half_life(500)
    (None, 500.0)
    """
    if value is None:
        return None
    h = float(value)
    if not (math.isfinite(h) and 1.0 <= h <= MAX_HALF_LIFE):
        raise ParamError("half_life", f"must be null or lie in [1, {MAX_HALF_LIFE:g}] events, "
                         f"got {value!r}")
    return h


def discount(half_life: float | None) -> float:
    """Per-event weight ``gamma = 2^(-1/half_life)`` (1.0 without a half-life).

    >>> discount(1.0), discount(None)
    (0.5, 1.0)
    """
    return 1.0 if half_life is None else 2.0 ** (-1.0 / half_life)


def decay(gamma: float, steps: np.ndarray) -> np.ndarray:
    """``gamma ** steps`` elementwise, the weight after ``steps`` events (one numpy power, so
    the same bits whether a learner ages an arm one event or a batch at a time).

    >>> decay(0.5, np.array([0, 1, 3]))
    array([1.   , 0.5  , 0.125])
    """
    out: np.ndarray = np.power(gamma, np.asarray(steps, dtype=np.float64))
    return out


def effective_count(gamma: float, count: int) -> float:
    """Total weight ``sum_{s < count} gamma^s`` of ``count`` events: ``count`` without
    forgetting, at most ``1 / (1 - gamma)`` (about ``half_life / ln 2``) with it.

    >>> effective_count(1.0, 7), round(effective_count(0.5, 60), 6)
    (7.0, 2.0)
    """
    if gamma == 1.0:
        return float(count)
    return float(-math.expm1(count * math.log(gamma)) / (1.0 - gamma))
