"""The unbiased click proxy h and the noise-rate validation (P1 Lemma 1, eq. (4))."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.proxy import BETA_FLOOR, check_noise_rates, unbiased_click

GRID = [(r0, r1) for r0 in np.linspace(0.0, 0.6, 7) for r1 in np.linspace(0.0, 0.6, 7)
        if 1.0 - r0 - r1 >= 0.05]


@pytest.mark.parametrize("rho0, rho1", GRID)
def test_unbiased_click_is_exactly_unbiased(rho0: float, rho1: float) -> None:
    h0, h1 = unbiased_click(np.array([0.0, 1.0]), rho0, rho1)
    # E[h | f = 0] = (1 - rho0) h(0) + rho0 h(1) = 0
    # E[h | f = 1] = rho1 h(0) + (1 - rho1) h(1) = 1
    assert (1 - rho0) * h0 + rho0 * h1 == pytest.approx(0.0, abs=1e-12)
    assert rho1 * h0 + (1 - rho1) * h1 == pytest.approx(1.0, abs=1e-12)


def test_unbiased_click_monte_carlo_within_4se() -> None:
    rng = np.random.default_rng(0)
    rho0, rho1, n = 0.2, 0.4, 400_000
    f = (rng.random(n) < 0.3).astype(float)
    noisy = np.where(rng.random(n) < np.where(f == 1, rho1, rho0), 1 - f, f)
    h = unbiased_click(noisy, rho0, rho1)
    for value in (0.0, 1.0):
        sel = h[f == value]
        assert abs(sel.mean() - value) < 4 * sel.std() / np.sqrt(sel.size)


def test_unbiased_click_is_identity_without_noise() -> None:
    f = np.array([0.0, 1.0, 1.0])
    np.testing.assert_array_equal(unbiased_click(f, 0.0, 0.0), f)


@pytest.mark.parametrize("rho0, rho1, field", [
    (-0.1, 0.0, "rho0"), (1.0, 0.0, "rho0"), (0.0, 1.2, "rho1"), (float("nan"), 0.1, "rho0"),
    (0.5, 0.5, "rho1"), (0.6, 0.395, "rho1"),
])
def test_check_noise_rates_refuses_invalid_rates(rho0: float, rho1: float, field: str) -> None:
    with pytest.raises(ParamError) as info:
        check_noise_rates(rho0, rho1)
    assert info.value.field == field


def test_check_noise_rates_beta_floor_and_custom_minimum() -> None:
    assert check_noise_rates(0.5, 0.5 - BETA_FLOOR) == (0.5, 0.5 - BETA_FLOOR)
    with pytest.raises(ParamError, match=r">= 0\.1"):
        check_noise_rates(0.5, 0.45, beta_min=0.1)


def test_check_noise_rates_warns_on_small_beta(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.learners.proxy"):
        check_noise_rates(0.5, 0.47)
    assert "beta" in caplog.text
