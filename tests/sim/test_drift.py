"""Drift schedules: shares of the new world, label maps and relevance rotations."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.drift import Drift, derangement, drifted_labels, rotated
from app.sim.rank import RankSimulator


def test_abrupt_labels_move_every_class_at_the_change() -> None:
    y = np.tile(np.arange(5), 40)
    out = drifted_labels(y, Drift("abrupt", change_at=100), 5, np.random.default_rng(0))
    assert (out[:100] == y[:100]).all() and (out[100:] != y[100:]).all()
    # one map: each class goes to one label
    assert all(len(set(out[100:][y[100:] == c])) == 1 for c in range(5))


def test_gradual_labels_follow_the_ramp() -> None:
    y = np.zeros(40_000, dtype=np.int64)
    out = drifted_labels(y, Drift("gradual", change_at=10_000, span=20_000), 3,
                         np.random.default_rng(1))
    moved = out != y
    assert not moved[:10_000].any() and moved[30_000:].all()
    # half way up the ramp about half the rounds use the new map (sd 0.005 over 10,000)
    assert abs(moved[15_000:25_000].mean() - 0.5) < 0.03


def test_churn_swaps_one_more_pair_per_period() -> None:
    y = np.tile(np.arange(4), 3_000)
    drift = Drift("churn", change_at=4_000, span=4_000)
    out = drifted_labels(y, drift, 4, np.random.default_rng(2))
    assert (out[:4_000] == y[:4_000]).all()
    first = out[4_000:8_000] != y[4_000:8_000]
    assert set(y[4_000:8_000][first]) and len(set(y[4_000:8_000][first])) == 2


def test_derangement_has_no_fixed_point() -> None:
    for seed in range(20):
        p = derangement(2 + seed % 5, np.random.default_rng(seed))
        assert (p != np.arange(p.shape[0])).all() and sorted(p) == list(range(p.shape[0]))


def test_rotation_keeps_the_scale() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 2, (8, 8)), rng.normal(0, 2, (8, 8))
    mid = rotated(a, b, 0.5)
    assert np.linalg.norm(mid) == pytest.approx(np.linalg.norm(a), rel=0.25)
    per_row = rotated(a, b, np.r_[np.ones(3), np.zeros(5)])
    np.testing.assert_allclose(per_row[3:], a[3:])
    np.testing.assert_allclose(per_row[:3], b[:3], atol=1e-12)


def test_rank_simulator_changes_relevance_only_after_the_change() -> None:
    still = RankSimulator(seed=4)
    moving = RankSimulator(seed=4, drift=Drift("abrupt", change_at=50))
    for _ in range(50):
        a, b = still.request(), moving.request()
        np.testing.assert_array_equal(a.relevance, b.relevance)
    a, b = still.request(), moving.request()
    np.testing.assert_array_equal(a.actions, b.actions)
    assert not np.allclose(a.relevance, b.relevance)


def test_drift_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="drift must be one of"):
        Drift("sudden")
    with pytest.raises(ValueError, match="span"):
        Drift("gradual", span=0)
