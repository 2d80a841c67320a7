"""Tests of the noisy-input streams and the copy oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.sim.noisy_inputs import CopyOracle, load_noisy_input


@pytest.mark.parametrize("name", ["linear-gaussian", "friedman1"])
def test_load_regression_sets_centres_inputs_and_standardises_targets(name: str) -> None:
    data = load_noisy_input(name, n=400, seed=3)
    assert not data.classification
    np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-12)
    assert data.y.mean() == pytest.approx(0.0, abs=1e-12)
    assert data.y.std() == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["moons", "circles"])
def test_load_classification_sets_gives_signed_labels(name: str) -> None:
    data = load_noisy_input(name, n=300, seed=1)
    assert data.classification and set(np.unique(data.y)) == {-1.0, 1.0}
    assert data.X.shape == (300, 2)


def test_load_without_centring_keeps_friedman1_in_unit_cube() -> None:
    data = load_noisy_input("friedman1", n=200, seed=0, centre=False)
    assert data.X.min() >= 0.0 and data.X.max() <= 1.0


def test_load_csv_with_two_target_values_is_classification(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    path.write_text("a,b,y\n0.1,0.2,3\n0.3,0.1,5\n-0.2,0.0,3\n")
    data = load_noisy_input(str(path), n=5)
    assert data.classification
    np.testing.assert_array_equal(data.y, [-1.0, 1.0, -1.0, -1.0, 1.0])


def test_oracle_copies_are_unbiased_with_the_given_spread() -> None:
    oracle = CopyOracle(0.5, np.random.default_rng(0))
    x = np.array([1.0, -2.0])
    copies = oracle.copies(x, 20000)
    assert oracle.queries == 20000
    np.testing.assert_allclose(copies.mean(axis=0), x, atol=4 * 0.5 / np.sqrt(20000))
    np.testing.assert_allclose(copies.std(axis=0), 0.5, rtol=0.03)


def test_oracle_refuses_negative_noise() -> None:
    with pytest.raises(ValueError, match="std"):
        CopyOracle(-1.0, np.random.default_rng(0))
