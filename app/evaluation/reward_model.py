"""The doubly robust estimator's reward model: ridge regression per action, cross-fitted,
from sums that merge.

For each action ``a`` a ridge regression (with an unpenalised intercept) of
the reward on the context, fitted on the events that took ``a``:
``w_a = (X_a' X_a + lam I)^-1 X_a' r_a`` on centred data.  With ``folds``
folds (cross-fitting, Chernozhukov et al. 2018; as Open Bandit Pipeline's
``RegressionModel.fit_predict`` with ``n_folds``), the prediction for an
event comes from the models fitted on the other folds, so that the reward
model's error is independent of the event's own reward.

The fit needs only per fold and action the sums ``n, sum x, sum r, X'X,
X'r`` (:class:`RidgeSums`): they add up over batches and merge across
processes exactly, and the centred normal equations follow from them
(``Xc'Xc = X'X - n m m'``).  An event's fold comes from a hash of its
position in the log (:func:`app.evaluation.sums.fold_of`), so that every
engine puts it in the same fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RidgeSums:
    """Per fold and action: events, ``sum x``, ``sum r``, ``X'X`` and ``X'r``."""

    count: np.ndarray
    """``folds x K``."""
    sx: np.ndarray
    """``folds x K x d``."""
    sr: np.ndarray
    """``folds x K``."""
    sxx: np.ndarray
    """``folds x K x d x d``."""
    sxr: np.ndarray
    """``folds x K x d``."""

    @classmethod
    def zeros(cls, folds: int, n_actions: int, dim: int) -> RidgeSums:
        return cls(np.zeros((folds, n_actions)), np.zeros((folds, n_actions, dim)),
                   np.zeros((folds, n_actions)), np.zeros((folds, n_actions, dim, dim)),
                   np.zeros((folds, n_actions, dim)))

    def add(self, X: np.ndarray, actions: np.ndarray, r: np.ndarray, fold: np.ndarray) -> None:
        """Add events (contexts, actions taken, rewards, folds)."""
        folds, n_actions = self.count.shape
        group = fold * n_actions + actions
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(folds * n_actions + 1))
        Xs, rs = X[order], r[order]
        for g in np.flatnonzero(np.diff(bounds)):
            k, a = divmod(int(g), n_actions)
            Xg, rg = Xs[bounds[g]:bounds[g + 1]], rs[bounds[g]:bounds[g + 1]]
            self.count[k, a] += len(rg)
            self.sx[k, a] += Xg.sum(axis=0)
            self.sr[k, a] += rg.sum()
            self.sxx[k, a] += Xg.T @ Xg
            self.sxr[k, a] += Xg.T @ rg

    def merge(self, other: RidgeSums) -> None:
        """Add another's sums (of other events)."""
        for name in ("count", "sx", "sr", "sxx", "sxr"):
            getattr(self, name).__iadd__(getattr(other, name))

    def fit(self, lam: float) -> RidgeModel:
        """The cross-fitted models: fold ``k``'s from the sums of the other folds (of all
        with one fold)."""
        folds, n_actions, dim = self.sx.shape
        intercept = np.zeros((folds, n_actions))
        coef = np.zeros((folds, n_actions, dim))
        totals = [s.sum(axis=0) for s in (self.count, self.sx, self.sr, self.sxx, self.sxr)]
        for k in range(folds):
            n, sx, sr, sxx, sxr = ((t - s[k]) if folds > 1 else t for t, s in zip(
                totals, (self.count, self.sx, self.sr, self.sxx, self.sxr), strict=True))
            for a in np.flatnonzero(n > 0):
                mean_r, mean_x = sr[a] / n[a], sx[a] / n[a]
                if dim:
                    A = sxx[a] - n[a] * np.outer(mean_x, mean_x) + lam * np.eye(dim)
                    coef[k, a] = np.linalg.solve(A, sxr[a] - n[a] * mean_x * mean_r)
                intercept[k, a] = mean_r - mean_x @ coef[k, a]
        return RidgeModel(intercept, coef)



def merged(total: RidgeSums | None, part: RidgeSums) -> RidgeSums:
    """``part`` added to ``total`` (``part`` itself when there is no total yet)."""
    if total is None:
        return part
    total.merge(part)
    return total


@dataclass(frozen=True)
class RidgeModel:
    """Per fold (the fold of the events it predicts) and action, a ridge's intercept and
    coefficients; an action without events predicts 0."""

    intercept: np.ndarray
    coef: np.ndarray

    def predict(self, X: np.ndarray, fold: np.ndarray) -> np.ndarray:
        """``q[i, a]``, ``n x K``: each event's row from its fold's models."""
        q = np.empty((len(X), self.intercept.shape[1]))
        for k in range(len(self.intercept)):
            rows = fold == k
            q[rows] = X[rows] @ self.coef[k].T + self.intercept[k]
        return q
