"""The diagonal ridge learners' batch in one compiled pass (:class:`~app.learners.ridge.DiagRidge`).

One loop over the events in their order applies each event's step to the arm
it played, exactly the steps of :meth:`~app.learners.ridge.DiagRidge.learn_one`
(the reference): with ``t`` events learned before it, ``a`` its arm, ``x`` its
input and ``c`` its click,

    lambda   = max(ridge * sum_norm2 / t, MIN_LAMBDA)   (ridge when t = 0 or sum_norm2 = 0)
    (forgetting) sum_x2_[a] *= gamma^s, sum_x2_sq_[a] = sum_x2_sq_[a] gamma^2s + x^2,
                 s = t + 1 - aged_at_[a], aged_at_[a] = t + 1
    r        = c - weights_[a] . x
    (residuals, aged by gamma_c^s', s' = t + 1 - resid_at_[a])
             resid_sum_[a] = resid_sum_[a] g + r, resid_sq_[a] = resid_sq_[a] g + r^2,
             resid_weight_[a] = resid_weight_[a] g + 1, resid_at_[a] = t + 1
    g        = x / (lambda + sum_x2_[a])
    weights_[a] += g r / (1 + x . g),  sum_x2_[a] += x^2,  sum_norm2 += ||x||^2.

The sums over features run left to right, where numpy's may pair terms, so
the results agree with the numpy path to rounding (``1e-12`` relative, tested),
not bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.jit import njit


def _example() -> tuple[Any, ...]:
    """Arguments of the types :meth:`~app.learners.ridge.DiagRidge.learn_many` passes: one
    event, one arm, one feature, with forgetting."""
    one = np.ones((1, 1))
    at = np.zeros(1, dtype=np.int64)
    return (one, np.zeros(1, dtype=np.intp), np.ones(1), one.copy(), one.copy(), one.copy(),
            at.copy(), np.zeros(1), np.zeros(1), np.zeros(1), at.copy(), 0.0, 0, 0.5,
            1e-300, 0.5, 0.5, True)


@njit(example=_example)
def diag_ridge_pass(X: np.ndarray, played: np.ndarray, click: np.ndarray,
                    weights: np.ndarray, sum_x2: np.ndarray, sum_x2_sq: np.ndarray,
                    aged_at: np.ndarray, resid_sum: np.ndarray, resid_sq: np.ndarray,
                    resid_weight: np.ndarray, resid_at: np.ndarray, sum_norm2: float,
                    count: int, ridge: float, min_lambda: float, gamma: float,
                    calibration_gamma: float, forgets: bool) -> float:
    """Learn the events ``(X[i], played[i], click[i])`` in order (module formulas), updating
    the state arrays in place; return the new ``sum_norm2``.

    ``count`` is the number of events learned before; with ``forgets`` false
    ``sum_x2_sq`` and ``aged_at`` are not read.
    """
    n, d = X.shape
    gain = np.empty(d)
    for i in range(n):
        a = played[i]
        t = count + i
        now = t + 1
        lam = ridge * (sum_norm2 / t) if t > 0 and sum_norm2 > 0.0 else ridge
        lam = max(lam, min_lambda)
        if forgets:
            age = gamma ** float(now - aged_at[a])
            age2 = age * age
            for j in range(d):
                sum_x2[a, j] *= age
                sum_x2_sq[a, j] = sum_x2_sq[a, j] * age2 + X[i, j] * X[i, j]
            aged_at[a] = now
        mean = 0.0
        xg = 0.0
        norm2 = 0.0
        for j in range(d):
            xj = X[i, j]
            mean += weights[a, j] * xj
            gain[j] = xj / (lam + sum_x2[a, j])
            xg += xj * gain[j]
            norm2 += xj * xj
        resid = click[i] - mean
        r_age = calibration_gamma ** float(now - resid_at[a])
        resid_sum[a] = resid_sum[a] * r_age + resid
        resid_sq[a] = resid_sq[a] * r_age + resid * resid
        resid_weight[a] = resid_weight[a] * r_age + 1.0
        resid_at[a] = now
        step = resid / (1.0 + xg)
        for j in range(d):
            xj = X[i, j]
            weights[a, j] += gain[j] * step
            sum_x2[a, j] += xj * xj
        sum_norm2 += norm2
    return sum_norm2
