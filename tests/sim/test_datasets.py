"""Data set loaders: shapes, normalisation, SynSep separability, CSV parsing, stream order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.sim.datasets import (
    CLASSIFICATION_DATASETS,
    load_classification,
    stream_indices,
    synthetic,
)


@pytest.mark.parametrize("name", CLASSIFICATION_DATASETS)
def test_load_classification_shapes_and_unit_norm(name: str) -> None:
    X, y = load_classification(name, n=300, seed=3)
    assert X.dtype == np.float64 and y.dtype == np.int64
    assert X.ndim == 2 and y.shape == (X.shape[0],)
    assert y.min() == 0 and len(np.unique(y)) == y.max() + 1
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-12)


def test_load_classification_synthetic_shape_and_determinism() -> None:
    X, y = load_classification("synsep", n=500, seed=7, normalise=False)
    X2, y2 = load_classification("synsep", n=500, seed=7, normalise=False)
    assert X.shape == (500, 400)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert set(np.unique(X)) <= {0.0, 1.0}
    # 20 common features on, prototype minus 5 rare features on
    np.testing.assert_array_equal(X[:, 120:].sum(axis=1), 20)
    assert np.all((X[:, :120].sum(axis=1) >= 15) & (X[:, :120].sum(axis=1) <= 35))
    assert not np.array_equal(X, load_classification("synsep", n=500, seed=8,
                                                     normalise=False)[0])


@pytest.mark.parametrize("n_classes", [9, 20])
def test_synthetic_synsep_is_linearly_separable(n_classes: int) -> None:
    X, y = synthetic(5000, np.random.default_rng(11), n_classes=n_classes)
    assert set(np.unique(y)) == set(range(n_classes))
    rare = X[:, :120]
    # oracle separator of the docstring, from the union of each class's rare features
    union = np.stack([rare[y == c].max(axis=0) for c in range(n_classes)])
    W = 2.0 * union - 1.0
    scores = rare @ W.T
    true = scores[np.arange(len(y)), y]
    scores[np.arange(len(y)), y] = -np.inf
    assert np.all(true - scores.max(axis=1) >= 2.0)


def test_synthetic_synnonsep_flips_five_percent() -> None:
    n = 20_000
    _, y_sep = synthetic(n, np.random.default_rng(5))
    _, y_non = synthetic(n, np.random.default_rng(5), label_noise=0.05)
    rate = np.mean(y_sep != y_non)
    se = np.sqrt(0.05 * 0.95 / n)
    assert abs(rate - 0.05) < 4 * se


def test_load_classification_no_normalise_keeps_raw() -> None:
    X, _ = load_classification("iris", normalise=False)
    assert X.shape == (150, 4) and X.max() > 1.0


def test_load_csv_maps_labels_and_skips_header(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n1,0,cat\n0,2,dog\n3,4,cat\n0,0,emu\n")
    X, y = load_classification(str(path), normalise=False)
    np.testing.assert_array_equal(X, [[1, 0], [0, 2], [3, 4], [0, 0]])
    np.testing.assert_array_equal(y, [0, 1, 0, 2])
    Xn, _ = load_classification(str(path))
    np.testing.assert_allclose(np.linalg.norm(Xn[:3], axis=1), 1.0)
    np.testing.assert_array_equal(Xn[3], 0.0)


def test_load_csv_numeric_labels_sorted_numerically(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("1,10\n2,9\n3,100\n")
    _, y = load_classification(str(path))
    np.testing.assert_array_equal(y, [1, 0, 2])


@pytest.mark.parametrize("content, message", [
    ("1,a\n1,2,b\n", "columns"),
    ("x,label\n", "no data rows"),
    ("1,a\nz,b\n", "non-numeric"),
    ("1,a\n2,a\n", "2 distinct labels"),
])
def test_load_csv_refuses_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_classification(str(path))


def test_load_classification_refuses_unknown_name() -> None:
    with pytest.raises(ValueError, match="neither a known name"):
        load_classification("no-such-set")


def test_stream_indices_permutation_when_enough_rows() -> None:
    idx = stream_indices(100, 60, np.random.default_rng(0))
    assert idx.shape == (60,) and len(np.unique(idx)) == 60 and idx.max() < 100


def test_stream_indices_with_replacement_when_short() -> None:
    idx = stream_indices(10, 1000, np.random.default_rng(0))
    assert idx.shape == (1000,) and set(np.unique(idx)) == set(range(10))


def test_stream_indices_refuses_empty_data() -> None:
    with pytest.raises(ValueError, match="n_rows"):
        stream_indices(0, 5, np.random.default_rng(0))
