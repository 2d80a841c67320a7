"""The reward model of a context wider than MAX_EXACT_FEATURES: fitted on the signed hashed
projection of the features, DR's value is the one computed by hand on those features."""

from __future__ import annotations

import numpy as np

from app.evaluation.estimators import LabelLog, evaluate
from app.evaluation.reward_model import (
    HASHED_FEATURES,
    MAX_EXACT_FEATURES,
    RidgeSums,
    projection,
    reward_features,
)
from app.evaluation.sums import fold_of, row_hash, row_keys

WIDTH = 100_000
N, K = 60, 3


def _wide_log() -> tuple[LabelLog, np.ndarray]:
    """60 events of 100,000 features, one non-zero each (the column and its value kept),
    3 labels logged uniformly, clicks that depend on the feature's parity."""
    rng = np.random.default_rng(3)
    cols = rng.integers(0, WIDTH, size=N)
    vals = rng.uniform(0.5, 2.0, size=N)
    X = np.zeros((N, WIDTH))
    X[np.arange(N), cols] = vals
    actions = rng.integers(0, K, size=N)
    rewards = (rng.random(N) < np.where(cols % 2 == actions % 2, 0.8, 0.2)).astype(float)
    log = LabelLog(X=X, actions=actions, propensities=np.full(N, 1 / K), rewards=rewards,
                   n_actions=K)
    return log, np.stack([cols, vals], axis=1)


def _dr_by_hand(log: LabelLog, entries: np.ndarray, target: np.ndarray, lam: float) -> float:
    """DR with the cross-fitted centred ridge of each label solved on the hashed features,
    each event's one non-zero ``v`` at column ``j`` put by hand at bucket ``h(j)`` as
    ``s(j) v``."""
    bucket, sign = projection(WIDTH)
    Z = np.zeros((N, HASHED_FEATURES))
    for i, (j, v) in enumerate(entries):
        Z[i, bucket[int(j)]] += sign[int(j)] * v
    fold = fold_of(row_hash(row_keys(np.arange(N)), 0), 2)
    q = np.zeros((N, K))
    for k in range(2):
        for a in range(K):
            train = (fold != k) & (log.actions == a)
            if not train.any():
                continue
            Zt, rt = Z[train], log.rewards[train]
            mz, mr = Zt.mean(axis=0), rt.mean()
            coef = np.linalg.solve((Zt - mz).T @ (Zt - mz) + lam * np.eye(HASHED_FEATURES),
                                   (Zt - mz).T @ (rt - mr))
            q[fold == k, a] = mr - mz @ coef + Z[fold == k] @ coef
    w = target[np.arange(N), log.actions] / log.propensities
    q_taken = q[np.arange(N), log.actions]
    return float(np.mean(np.einsum("ij,ij->i", target, q) + w * (log.rewards - q_taken)))


def test_a_wide_context_is_hashed_from_its_non_zeros_only() -> None:
    X = np.zeros((2, MAX_EXACT_FEATURES + 1))
    X[0, 3], X[1, MAX_EXACT_FEATURES] = 2.0, -1.5
    bucket, sign = projection(MAX_EXACT_FEATURES + 1)
    expected = np.zeros((2, HASHED_FEATURES))
    expected[0, bucket[3]] = 2.0 * sign[3]
    expected[1, bucket[-1]] = -1.5 * sign[-1]
    assert np.array_equal(reward_features(X), expected)
    narrow = np.ones((2, MAX_EXACT_FEATURES))
    assert reward_features(narrow) is narrow  # a narrow model's features as they are
    assert RidgeSums.zeros(2, K, WIDTH).sxx.shape == (2, K, HASHED_FEATURES, HASHED_FEATURES)


def test_a_100000_feature_evaluation_runs_and_dr_is_the_hashed_ridge_by_hand() -> None:
    log, entries = _wide_log()
    target = np.tile([0.6, 0.3, 0.1], (N, 1))
    result = evaluate(log, target, n_boot=20, ridge=1.0)
    by_hand = _dr_by_hand(log, entries, target, 1.0)
    # the same algebra in another summation order (X'X - n m m' against Zc'Zc): with the
    # ridge at 1 the systems' condition number is at most 1 + N * max|z|^2 = 241, so the
    # two agree to about N * cond * 2.2e-16 = 3e-12 in the coefficients; 1e-9 leaves room
    assert abs(result.dr.value - by_hand) < 1e-9, (result.dr.value, by_hand)
    # the reward model did something: DR differs from IPS on this log
    assert abs(result.dr.value - result.ips.value) > 1e-6
