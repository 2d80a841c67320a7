"""Bandit Passive-Aggressive's batch in one compiled pass (:class:`~app.learners.bpa.BanditPA`).

The steps of :meth:`~app.learners.bpa.BanditPA.learn_one` (the reference),
event after event: with ``s = 2 click - 1`` and ``a`` the played row,

    l = max(0, 1 - s (W[a] . x)),   W[a] += (s l / ||x||^2) x     (skipped when ||x|| = 0).

The sums over features run left to right, where numpy's may pair terms, so
the results agree with the loop to rounding (tested), not bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.jit import njit


def _example() -> tuple[Any, ...]:
    """Arguments of the types :meth:`~app.learners.bpa.BanditPA.learn_many` passes."""
    return np.ones((1, 1)), np.zeros(1, dtype=np.intp), np.ones(1), np.zeros((1, 1))


@njit(example=_example)
def bpa_pass(X: np.ndarray, played: np.ndarray, sign: np.ndarray, W: np.ndarray) -> None:
    """Learn the events ``(X[i], played[i], sign[i])`` in order (module formula), updating
    ``W`` in place."""
    n, d = X.shape
    for i in range(n):
        norm2 = 0.0
        for j in range(d):
            norm2 += X[i, j] * X[i, j]
        if norm2 == 0.0:
            continue
        a = played[i]
        score = 0.0
        for j in range(d):
            score += W[a, j] * X[i, j]
        loss = max(0.0, 1.0 - sign[i] * score)
        step = sign[i] * loss / norm2
        for j in range(d):
            W[a, j] += step * X[i, j]
