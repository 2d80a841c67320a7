"""Tests of the regression streams and label-noise simulation (P3 Section 4.1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.sim.regression import (
    CHANNEL_TAPS,
    channel,
    draw_labels,
    linear_gaussian,
    load_regression,
    noise_variances,
)


def test_linear_gaussian_is_linear_plus_small_noise() -> None:
    X, y = linear_gaussian(2000, np.random.default_rng(0))
    assert X.shape == (2000, 20) and y.shape == (2000,)
    w, *_ = np.linalg.lstsq(X, y, rcond=None)
    residual_var = np.mean((X @ w - y) ** 2)
    # Noise variance 0.01; least squares leaves (n - d)/n of it, 4 SE ~ 0.0013.
    assert residual_var == pytest.approx(0.01 * (2000 - 20) / 2000, abs=0.0013)


def test_channel_rows_are_received_windows() -> None:
    X, s = channel(500, np.random.default_rng(1))
    assert X.shape == (500, 20)
    np.testing.assert_array_equal(X[1:, 1:], X[:-1, :-1])   # shift register
    received = X[:, 0]
    clean = np.convolve(s, CHANNEL_TAPS)[:500]
    # Channel noise variance 4e-4: 4 SE of the mean square over 500 samples ~ 1.4e-4.
    assert np.mean((received - clean) ** 2) == pytest.approx(4e-4, abs=1.5e-4)


def test_channel_is_linearly_equalisable() -> None:
    X, s = channel(5000, np.random.default_rng(2))
    w, *_ = np.linalg.lstsq(X, s, rcond=None)
    assert np.mean((X @ w - s) ** 2) < 2e-3


@pytest.mark.parametrize("name", ["linear-gaussian", "channel"])
def test_load_regression_is_seeded(name: str) -> None:
    a, b, c = (load_regression(name, n=50, seed=s) for s in (3, 3, 4))
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[1], c[1])


def test_load_csv_with_header_repeats_rows(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b,target\n1,2,3.5\n4,5,6.5\n\n")
    X, y = load_regression(str(path), n=5)
    np.testing.assert_array_equal(y, [3.5, 6.5, 3.5, 6.5, 3.5])
    np.testing.assert_array_equal(X[1], [4.0, 5.0])


@pytest.mark.parametrize("text", ["1,2\n3\n", "1,2\n3,x\n", "1,nan\n", "5\n"])
def test_load_csv_refuses_bad_files(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError):
        load_regression(str(path), n=3)


def test_load_unknown_name_is_refused() -> None:
    with pytest.raises(ValueError, match="neither a known name"):
        load_regression("no-such-set", n=3)


def test_noise_variances_schedules() -> None:
    rng = np.random.default_rng(0)
    uniform = noise_variances(10_000, 5.0, rng)
    assert uniform.min() >= 0 and uniform.max() <= 5
    # Mean of U[0, 5] is 2.5 with SE 5/sqrt(12 n).
    assert uniform.mean() == pytest.approx(2.5, abs=4 * 5 / np.sqrt(12 * 10_000))
    up = noise_variances(11, 5.0, rng, "increasing")
    np.testing.assert_allclose(up, np.linspace(0, 5, 11))
    np.testing.assert_allclose(noise_variances(11, 5.0, rng, "decreasing"), up[::-1])
    with pytest.raises(ValueError):
        noise_variances(3, -1.0, rng)
    with pytest.raises(ValueError):
        noise_variances(3, 1.0, rng, "random")


def test_draw_labels_mean_and_variance() -> None:
    labels = draw_labels(2.0, 3.0, 40_000, np.random.default_rng(0))
    assert labels.mean() == pytest.approx(2.0, abs=4 * np.sqrt(3.0 / 40_000))
    # SE of the sample variance of a Gaussian: v·sqrt(2/n).
    assert labels.var() == pytest.approx(3.0, abs=4 * 3.0 * np.sqrt(2 / 40_000))
    assert draw_labels(1.0, 0.0, 0, np.random.default_rng(0)).shape == (0,)
