"""``ridge_ucb``'s decisions and updates in compiled passes (:mod:`app.learners.ridge_actions`).

Three kernels run the same steps as the learner's numpy path (the reference), one event
after the other, without numpy's per-call overhead (what one decision at a time pays):

- :func:`ucb_solve`: ``V = gram + lambda I``, ``C = V^-1`` by Cholesky, ``theta = C b`` and
  the width matrix ``W = C`` (with forgetting ``W = C (gram_sq + lambda I) C``);
- :func:`ucb_decide`: per input ``z = [1, x]``, the grid's means ``(z T) B^T`` and widths
  ``sqrt(B_g^T (sum_ik z_i z_k W[i, ., k, .]) B_g)``, the greedy and the optimistic grid
  action (the first maximum), then the smoothed draw from two uniforms and its density
  (:func:`app.learners.smoothing.draw_smoothed`, :func:`~app.learners.smoothing.smoothed_pdf`);
- :func:`ucb_learn`: checks every event (a code naming the first bad column, state untouched),
  then per event the corrected reward ``r`` (a click: ``(reward - value rho0) /
  (1 - rho0 - rho1)``), ``t = clip(2 (a - lo) / (hi - lo) - 1, -1, 1)``, the Legendre values
  by numpy's ``legvander`` recurrence ``P_k = (P_{k-1} t (2k - 1) - P_{k-2} (k - 1)) / k``,
  ``phi = z (x) P(t)`` and ``gram = gamma gram + phi phi^T``, ``b = gamma b + r phi``
  (``gram_sq = gamma^2 gram_sq + phi phi^T`` when forgetting).

Sums run in another order than numpy's (the inverse by Cholesky where numpy's ``inv`` takes
LU), so the numbers agree with the numpy path to rounding (``1e-12`` relative, tested), not
bit for bit; one event's update is the same products as numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.jit import njit

#: :func:`ucb_learn`'s codes of a refused batch: the column the learner's checks name.
BAD_COLUMNS = ("", "x", "action", "pdf", "reward", "click_value")


def _solve_example() -> tuple[Any, ...]:
    return np.zeros((4, 4)), np.zeros((4, 4)), np.zeros(4), 1.0, False


def _decide_example() -> tuple[Any, ...]:
    return (np.zeros((1, 1)), np.zeros(4), np.eye(4), np.ones((3, 2)), np.linspace(0, 1, 3),
            1.0, True, np.full((1, 2), 0.5), 0.0, 1.0, 0.1, 0.05)


def _learn_example() -> tuple[Any, ...]:
    return (np.zeros((1, 1)), np.full(1, 0.5), np.ones(1), np.ones(1), np.full(1, np.nan),
            0.0, 1.0, 1, 0.0, 0.0, 1.0, False, np.zeros((4, 4)), np.zeros((0, 0)),
            np.zeros(4))


@njit(example=_solve_example)
def ucb_solve(gram: np.ndarray, gram_sq: np.ndarray, sum_rphi: np.ndarray, ridge: float,
              forgets: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(theta, W)`` of the module docstring (``gram_sq`` read only with ``forgets``)."""
    dim = gram.shape[0]
    low = np.zeros((dim, dim))  # V = L L^T
    for j in range(dim):
        s = gram[j, j] + ridge
        for k in range(j):
            s -= low[j, k] * low[j, k]
        low[j, j] = np.sqrt(s)
        for i in range(j + 1, dim):
            s = gram[i, j]
            for k in range(j):
                s -= low[i, k] * low[j, k]
            low[i, j] = s / low[j, j]
    inv_low = np.zeros((dim, dim))  # L^-1, lower triangular
    for j in range(dim):
        inv_low[j, j] = 1.0 / low[j, j]
        for i in range(j + 1, dim):
            s = 0.0
            for k in range(j, i):
                s -= low[i, k] * inv_low[k, j]
            inv_low[i, j] = s / low[i, i]
    cov = np.zeros((dim, dim))  # V^-1 = L^-T L^-1
    for i in range(dim):
        for j in range(i + 1):
            s = 0.0
            for k in range(i, dim):
                s += inv_low[k, i] * inv_low[k, j]
            cov[i, j] = s
            cov[j, i] = s
    theta = np.zeros(dim)
    for i in range(dim):
        s = 0.0
        for j in range(dim):
            s += cov[i, j] * sum_rphi[j]
        theta[i] = s
    if not forgets:
        return theta, cov
    half = np.zeros((dim, dim))  # (gram_sq + lambda I) C
    for i in range(dim):
        for j in range(dim):
            s = ridge * cov[i, j]
            for k in range(dim):
                s += gram_sq[i, k] * cov[k, j]
            half[i, j] = s
    width = np.zeros((dim, dim))
    for i in range(dim):
        for j in range(dim):
            s = 0.0
            for k in range(dim):
                s += cov[i, k] * half[k, j]
            width[i, j] = s
    return theta, width


@njit(example=_decide_example)
def ucb_decide(X: np.ndarray, theta: np.ndarray, width: np.ndarray, basis: np.ndarray,
               actions: np.ndarray, alpha: float, explore: bool, u: np.ndarray, lo: float,
               hi: float, h: float, epsilon: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(greedy, action, pdf)`` per row of ``X`` (module docstring); without ``explore``
    the greedy action is played and ``u`` is not read."""
    n, d = X.shape
    n_grid, db = basis.shape
    dz = d + 1
    greedy = np.empty(n)
    action = np.empty(n)
    pdf = np.empty(n)
    z = np.empty(dz)
    m = np.empty(db)
    inner = np.empty((db, db))
    optimistic = explore and alpha != 0.0
    for r in range(n):
        z[0] = 1.0
        for i in range(d):
            z[i + 1] = X[r, i]
        for j in range(db):
            s = 0.0
            for i in range(dz):
                s += z[i] * theta[i * db + j]
            m[j] = s
        if optimistic:
            for j in range(db):
                for k in range(db):
                    s = 0.0
                    for i in range(dz):
                        for q in range(dz):
                            s += z[i] * z[q] * width[i * db + j, q * db + k]
                    inner[j, k] = s
        best = -np.inf
        best_g = 0
        top = -np.inf
        top_g = 0
        for g in range(n_grid):
            mean = 0.0
            for j in range(db):
                mean += basis[g, j] * m[j]
            if mean > best:
                best = mean
                best_g = g
            if optimistic:
                w2 = 0.0
                for j in range(db):
                    for k in range(db):
                        w2 += basis[g, j] * basis[g, k] * inner[j, k]
                score = mean + alpha * np.sqrt(max(w2, 0.0))
                if score > top:
                    top = score
                    top_g = g
        greedy[r] = actions[best_g]
        centre = actions[top_g] if optimistic else greedy[r]
        a = max(lo, centre - h)
        b = min(hi, centre + h)
        if not explore:
            played = greedy[r]
        elif u[r, 0] < epsilon:
            played = lo + u[r, 1] * (hi - lo)
        else:
            played = a + u[r, 1] * (b - a)
        action[r] = played
        inside = 1.0 if a <= played <= b else 0.0
        pdf[r] = epsilon / (hi - lo) + (1.0 - epsilon) * inside / (b - a)
    return greedy, action, pdf


@njit(example=_learn_example)
def ucb_learn(X: np.ndarray, action: np.ndarray, pdf: np.ndarray, reward: np.ndarray,
              click_value: np.ndarray, lo: float, hi: float, degree: int, rho0: float,
              rho1: float, gamma: float, forgets: bool, gram: np.ndarray,
              gram_sq: np.ndarray, sum_rphi: np.ndarray) -> int:
    """Learn the events in order (module docstring), updating the state in place; return 0,
    or the index in :data:`BAD_COLUMNS` of the first column refused (nothing learned)."""
    n, d = X.shape
    for r in range(n):
        for i in range(d):
            if not np.isfinite(X[r, i]):
                return 1
    for r in range(n):
        if not lo <= action[r] <= hi:
            return 2
    for r in range(n):
        if not (np.isfinite(pdf[r]) and pdf[r] > 0):
            return 3
    for r in range(n):
        if not np.isfinite(reward[r]):
            return 4
    for r in range(n):
        if np.isinf(click_value[r]):
            return 5
    db = degree + 1
    dim = (d + 1) * db
    z = np.empty(d + 1)
    p = np.empty(db)
    phi = np.empty(dim)
    beta = 1.0 - rho0 - rho1
    gamma2 = gamma * gamma
    for r in range(n):
        clicked = not np.isnan(click_value[r])
        y = (reward[r] - click_value[r] * rho0) / beta if clicked else reward[r]
        t = min(max(2.0 * (action[r] - lo) / (hi - lo) - 1.0, -1.0), 1.0)
        p[0] = 1.0
        if db > 1:
            p[1] = t
        for k in range(2, db):
            p[k] = (p[k - 1] * t * (2 * k - 1) - p[k - 2] * (k - 1)) / k
        z[0] = 1.0
        for i in range(d):
            z[i + 1] = X[r, i]
        for i in range(d + 1):
            for j in range(db):
                phi[i * db + j] = z[i] * p[j]
        for i in range(dim):
            sum_rphi[i] = gamma * sum_rphi[i] + phi[i] * y
            for j in range(dim):
                gram[i, j] = gamma * gram[i, j] + phi[i] * phi[j]
                if forgets:
                    gram_sq[i, j] = gamma2 * gram_sq[i, j] + phi[i] * phi[j]
    return 0
