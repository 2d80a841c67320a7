"""The reward model of smoothed DR: ridge regression on context-action features, cross-fitted,
from sums that merge.

The reward of a continuous log is modelled as ``q(x, a) = beta_k . phi(x, a)`` with
``phi(x, a) = z (x) P(t)``, ``z = [1, x]``, ``t = 2 (a - lo) / (hi - lo) - 1`` and ``P`` the
Legendre polynomials ``P_0 .. P_p`` (:data:`DEGREE`; the features ``ridge_ucb`` learns on):
a smooth reward curve over the range whose shape moves with the context.  With ``folds``
folds (cross-fitting, Chernozhukov et al. 2018, as :mod:`app.evaluation.reward_model`),
fold ``k``'s ``beta_k = (lambda I + sum_{i not in k} phi_i phi_i^T)^-1 sum_{i not in k}
r_i phi_i`` predicts the events of fold ``k``, so that its error is independent of the
event's own reward.  The fit needs per fold only ``sum phi phi^T`` and ``sum r phi``
(:class:`SmoothedRidgeSums`): they add up over batches and merge across processes.

Smoothed DR (Kallus & Zhou 2018, "Policy Evaluation and Optimization with Continuous
Treatments", Section 3, the doubly robust form of the kernel-smoothed estimator) needs per
event the model's mean over the target's window ``[a_i, b_i]``,
``qbar_i = (1 / (b_i - a_i)) int q(x_i, a) da = beta . (z (x) mean_{[t_a, t_b]} P)``, exact by
Gauss-Legendre quadrature on ``p + 1`` nodes (exact for polynomials of degree up to
``2p + 1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import legendre

from app.learners.ridge_actions import action_basis, context_action_features

#: Legendre degree of the reward curve over the range.
DEGREE = 3
#: Gauss-Legendre nodes and weights on [-1, 1] (exact for the window means, module docstring).
NODES, NODE_WEIGHTS = legendre.leggauss(DEGREE + 1)


def _inputs(X: np.ndarray) -> np.ndarray:
    """``Z = [1, X]``."""
    return np.hstack([np.ones((X.shape[0], 1)), X])


def features(X: np.ndarray, action: np.ndarray,
             action_range: tuple[float, float]) -> np.ndarray:
    """``phi(x_i, a_i)`` per row (module docstring), ``n x (d + 1)(p + 1)``."""
    return context_action_features(_inputs(X), action_basis(action, action_range, DEGREE))


def window_features(X: np.ndarray, a: np.ndarray, b: np.ndarray,
                    action_range: tuple[float, float]) -> np.ndarray:
    """The mean of ``phi(x_i, .)`` over each window ``[a_i, b_i]`` (module docstring).

    >>> X = np.zeros((1, 1))  # the whole range: P_0's mean 1, the others' 0
    >>> window_features(X, np.array([0.0]), np.array([1.0]), (0.0, 1.0)).round(12) + 0.0
    array([[1., 0., 0., 0., 0., 0., 0., 0.]])
    >>> window_features(X, np.array([0.5]), np.array([1.0]), (0.0, 1.0))[0, :3].round(12) + 0.0
    array([1. , 0.5, 0. ])
    """
    nodes = (a + b)[:, None] / 2 + (b - a)[:, None] / 2 * NODES[None, :]
    basis = action_basis(nodes, action_range, DEGREE)  # n x nodes x (p + 1)
    return context_action_features(_inputs(X), np.einsum("m,nmj->nj", NODE_WEIGHTS / 2, basis))


@dataclass
class SmoothedRidgeSums:
    """Per fold ``sum phi phi^T`` and ``sum r phi`` of a continuous log (module docstring)."""

    action_range: tuple[float, float]
    gram: np.ndarray
    """``folds x D x D``."""
    sphi: np.ndarray
    """``folds x D``."""

    @classmethod
    def zeros(cls, folds: int, width: int, action_range: tuple[float, float]
              ) -> SmoothedRidgeSums:
        """Empty sums of contexts of ``width`` features."""
        dim = (width + 1) * (DEGREE + 1)
        return cls(action_range, np.zeros((folds, dim, dim)), np.zeros((folds, dim)))

    def add(self, X: np.ndarray, action: np.ndarray, r: np.ndarray, fold: np.ndarray) -> None:
        """Add events (contexts, actions, rewards, folds)."""
        phi = features(X, action, self.action_range)
        for k in np.unique(fold):
            rows = fold == k
            self.gram[k] += phi[rows].T @ phi[rows]
            self.sphi[k] += phi[rows].T @ r[rows]

    def merge(self, other: SmoothedRidgeSums) -> None:
        """Add another's sums (of other events)."""
        self.gram += other.gram
        self.sphi += other.sphi

    def fit(self, lam: float) -> SmoothedRewardModel:
        """The cross-fitted coefficients: fold ``k``'s from the other folds' sums (from all
        with one fold)."""
        folds, dim = self.sphi.shape
        gram, sphi = self.gram.sum(axis=0), self.sphi.sum(axis=0)
        coef = np.empty((folds, dim))
        for k in range(folds):
            g, s = (gram - self.gram[k], sphi - self.sphi[k]) if folds > 1 else (gram, sphi)
            coef[k] = np.linalg.solve(g + lam * np.eye(dim), s)
        return SmoothedRewardModel(self.action_range, coef)


@dataclass(frozen=True)
class SmoothedRewardModel:
    """Per fold (of the events it predicts) the coefficients ``beta_k``."""

    action_range: tuple[float, float]
    coef: np.ndarray

    def predict(self, X: np.ndarray, action: np.ndarray, fold: np.ndarray) -> np.ndarray:
        """``q(x_i, a_i)`` from each event's fold's coefficients."""
        out: np.ndarray = np.einsum("nj,nj->n", features(X, action, self.action_range),
                                    self.coef[fold])
        return out

    def window_mean(self, X: np.ndarray, a: np.ndarray, b: np.ndarray,
                    fold: np.ndarray) -> np.ndarray:
        """``qbar_i``: the mean of ``q(x_i, .)`` over ``[a_i, b_i]`` (module docstring)."""
        out: np.ndarray = np.einsum("nj,nj->n", window_features(X, a, b, self.action_range),
                                    self.coef[fold])
        return out

    def dr_terms(self, X: np.ndarray, action: np.ndarray, reward: np.ndarray, w: np.ndarray,
                 a: np.ndarray, b: np.ndarray, fold: np.ndarray) -> np.ndarray:
        """``qbar_i + w_i (r_i - q(x_i, a_i))``, whose mean is smoothed DR."""
        out: np.ndarray = (self.window_mean(X, a, b, fold)
                           + w * (reward - self.predict(X, action, fold)))
        return out
