"""Feedback simulation: flip rates and set membership."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.feedback import noisy_clicks, set_contains


@pytest.mark.parametrize("rho0, rho1", [(0.0, 0.0), (0.2, 0.4), (0.3, 0.1), (0.05, 0.6)])
def test_noisy_clicks_flip_rates_within_4se(rho0: float, rho1: float) -> None:
    n = 200_000
    rng = np.random.default_rng(1)
    f = (rng.random(n) < 0.4).astype(float)
    noisy = noisy_clicks(f, rho0, rho1, np.random.default_rng(2))
    assert set(np.unique(noisy)) <= {0.0, 1.0}
    for true_value, rate in ((0.0, rho0), (1.0, rho1)):
        sel = f == true_value
        observed = np.mean(noisy[sel] != true_value)
        se = np.sqrt(rate * (1 - rate) / sel.sum())
        assert abs(observed - rate) <= 4 * se + 1e-12


def test_noisy_clicks_does_not_mutate_input() -> None:
    f = np.array([0.0, 1.0, 1.0])
    noisy_clicks(f, 0.5, 0.5, np.random.default_rng(0))
    np.testing.assert_array_equal(f, [0.0, 1.0, 1.0])


@pytest.mark.parametrize("rho0, rho1", [(-0.1, 0.0), (0.0, 1.0), (float("nan"), 0.1)])
def test_noisy_clicks_refuses_bad_rates(rho0: float, rho1: float) -> None:
    with pytest.raises(ValueError, match="rho"):
        noisy_clicks(np.zeros(3), rho0, rho1, np.random.default_rng(0))


def test_noisy_clicks_refuses_non_binary() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        noisy_clicks(np.array([0.5]), 0.1, 0.1, np.random.default_rng(0))


def test_set_contains_labels_and_sets() -> None:
    y = np.array([2, 0, 1])
    np.testing.assert_array_equal(set_contains(np.array([2, 1, 1]), y), [1, 0, 1])
    sets = np.array([[0, 2], [1, 2], [1, 0]])
    np.testing.assert_array_equal(set_contains(sets, y), [1, 0, 1])
    assert set_contains(np.array([3, 4]), np.int64(4)) == 1.0


def test_set_contains_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        set_contains(np.zeros((2, 2, 2)), np.zeros(2))
