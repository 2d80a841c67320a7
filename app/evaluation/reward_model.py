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

A context wider than :data:`MAX_EXACT_FEATURES` is fitted on its signed
hashed projection (Weinberger et al. 2009, "Feature Hashing for Large Scale
Multitask Learning"): feature ``i`` adds ``s(i) x_i`` to bucket ``h(i)`` of
:data:`HASHED_FEATURES`, ``h`` and ``s = +-1`` fixed by a seeded generator
(:func:`projection`), so that the sums hold ``folds x K x B^2`` numbers
instead of ``folds x K x d^2`` (``d = 100,000``: 80 GB per fold and action;
``B = 512``: 2 MiB).  Only the reward model changes: DR's value
``mean_i [sum_a pi(a|x_i) q(x_i, a) + w_i (r_i - q(x_i, a_i))]`` stays
unbiased for any ``q`` fixed apart from the event's own reward (cross-fitting),
and its interval stays valid; a worse ``q`` only widens it.  A context of at
most :data:`MAX_EXACT_FEATURES` features is fitted on as is (its numbers do not
change).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

#: Widest context the reward model fits on as is.
MAX_EXACT_FEATURES = 4096
#: Buckets a wider context is hashed to (:func:`projection`).
HASHED_FEATURES = 512
#: The seed of the hash of a wide context's features (fixed: every engine and process
#: hashes alike).
HASH_SEED = 20091


def reward_dim(width: int) -> int:
    """The dimension the reward model of contexts of ``width`` features is fitted in.

    >>> reward_dim(10), reward_dim(100_000)
    (10, 512)
    """
    return width if width <= MAX_EXACT_FEATURES else HASHED_FEATURES


@functools.lru_cache(maxsize=8)
def projection(width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of the ``width`` features' bucket ``h(i)`` in ``0 .. B - 1`` and sign
    ``s(i) = +-1`` (``B`` = :data:`HASHED_FEATURES`), from a generator of seed
    :data:`HASH_SEED`: the same in every process."""
    rng = np.random.default_rng([HASH_SEED, width])
    return (rng.integers(0, HASHED_FEATURES, size=width),
            rng.choice(np.array([-1.0, 1.0]), size=width))


def reward_features(X: np.ndarray) -> np.ndarray:
    """The reward model's features of contexts ``X`` (``n x d``): ``X`` itself up to
    :data:`MAX_EXACT_FEATURES` features, else its hashed projection ``z_b = sum_{i: h(i) =
    b} s(i) x_i`` (``n x B``), summed over the non-zero entries only.

    >>> X = np.zeros((2, 5000)); X[0, 7] = 2.0
    >>> z = reward_features(X); z.shape, float(np.abs(z).sum())
    ((2, 512), 2.0)
    """
    width = X.shape[1]
    if width <= MAX_EXACT_FEATURES:
        return X
    bucket, sign = projection(width)
    rows, cols = np.nonzero(X)
    out = np.zeros((len(X), HASHED_FEATURES))
    np.add.at(out, (rows, bucket[cols]), sign[cols] * X[rows, cols])
    return out


@dataclass
class RidgeSums:
    """Per fold and action: events, ``sum x``, ``sum r``, ``X'X`` and ``X'r`` (``x``: the
    reward model's features, :func:`reward_features`, of dimension ``d``)."""

    width: int
    """The contexts' width (``d`` is :func:`reward_dim` of it)."""
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
    def zeros(cls, folds: int, n_actions: int, width: int) -> RidgeSums:
        """Empty sums of contexts of ``width`` features."""
        dim = reward_dim(width)
        return cls(width, np.zeros((folds, n_actions)), np.zeros((folds, n_actions, dim)),
                   np.zeros((folds, n_actions)), np.zeros((folds, n_actions, dim, dim)),
                   np.zeros((folds, n_actions, dim)))

    def add(self, X: np.ndarray, actions: np.ndarray, r: np.ndarray, fold: np.ndarray) -> None:
        """Add events (contexts, actions taken, rewards, folds)."""
        folds, n_actions = self.count.shape
        group = fold * n_actions + actions
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(folds * n_actions + 1))
        Xs, rs = reward_features(X)[order], r[order]
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
        """``q[i, a]``, ``n x K``: each event's row from its fold's models (on its
        :func:`reward_features`)."""
        q = np.empty((len(X), self.intercept.shape[1]))
        X = reward_features(X)
        for k in range(len(self.intercept)):
            rows = fold == k
            q[rows] = X[rows] @ self.coef[k].T + self.intercept[k]
        return q
