"""The doubly robust estimator's reward model: ridge regression per action, cross-fitted.

For each action ``a`` a ridge regression (with an unpenalised intercept) of
the reward on the context, fitted on the events that took ``a``:
``w_a = (X_a' X_a + lam I)^-1 X_a' r_a`` on centred data.  With ``folds``
folds (cross-fitting, Chernozhukov et al. 2018; as Open Bandit Pipeline's
``RegressionModel.fit_predict`` with ``n_folds``), the prediction for an
event comes from the models fitted on the other folds, so that the reward
model's error is independent of the event's own reward.
"""

from __future__ import annotations

import numpy as np


def _ridge_predict(X_fit: np.ndarray, r_fit: np.ndarray, X_new: np.ndarray,
                   lam: float) -> np.ndarray:
    """Ridge (intercept not penalised) fitted on ``(X_fit, r_fit)``, predicted at ``X_new``;
    the mean of ``r_fit`` (0 without rows) when there is nothing to regress on."""
    if len(r_fit) == 0:
        return np.zeros(len(X_new))
    mean_r = float(r_fit.mean())
    if X_fit.shape[1] == 0:
        return np.full(len(X_new), mean_r)
    mean_x = X_fit.mean(axis=0)
    Xc = X_fit - mean_x
    A = Xc.T @ Xc + lam * np.eye(X_fit.shape[1])
    w = np.linalg.solve(A, Xc.T @ (r_fit - mean_r))
    return np.asarray(mean_r + (X_new - mean_x) @ w)


def cross_fitted_rewards(X: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                         n_actions: int, folds: int = 2, lam: float = 1.0,
                         rng: np.random.Generator | None = None) -> np.ndarray:
    """``q[i, a]``, the predicted reward of action ``a`` in context ``X[i]``, ``n x K``,
    each row predicted by the per-action ridge models fitted on the other folds
    (events split at random into ``folds`` parts; ``folds=1`` fits and predicts on all)."""
    n = len(actions)
    rng = np.random.default_rng(0) if rng is None else rng
    fold = rng.permutation(n) % folds
    q = np.empty((n, n_actions))
    for k in range(folds):
        test = fold == k
        train = ~test if folds > 1 else test
        for a in range(n_actions):
            rows = train & (actions == a)
            q[test, a] = _ridge_predict(X[rows], rewards[rows], X[test], lam)
    return q
