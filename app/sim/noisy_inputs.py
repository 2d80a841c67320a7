"""Streams whose instances are only seen through noisy copies (paper P5, Section 2).

A stream is clean ``(X, y)``; the learner never sees ``X`` but asks a
:class:`CopyOracle` for independent copies ``x~ = x_t + N(0, std^2 I)``.
Metrics are scored against the clean instance and the clean target.

* ``linear-gaussian``: ``x ~ N(0, I_5)``, ``y = x^T u + N(0, 0.01)``
  (:func:`app.sim.regression.linear_gaussian` with ``d = 5``).
* ``friedman1``: scikit-learn's ``make_friedman1`` (``d = 10``, inputs in
  ``[0, 1]^10``, no target noise).
* ``moons``, ``circles``: scikit-learn's two-class sets (label noise 0.1 /
  0.05 as positional noise, ``factor = 0.5``), labels in ``{-1, +1}``.
* a CSV file: numeric columns, the last one the target (two distinct target
  values make it a classification set, mapped to ``-1/+1`` in sorted order).

Generated sets are centred (inputs minus their mean) and regression targets
standardised (zero mean, unit variance) unless ``centre=False``: uncentred
friedman1 lives in ``[0, 1]^10`` and the Gaussian-kernel estimator, whose
variance grows like ``exp(c ||x||^2 / sigma^2)``, diverges there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.regression import linear_gaussian, load_regression

#: Names accepted by :func:`load_noisy_input` (besides a CSV path).
NOISY_INPUT_DATASETS: tuple[str, ...] = ("linear-gaussian", "friedman1", "moons", "circles")
CLASSIFICATION_SETS = frozenset({"moons", "circles"})
LINEAR_DIM = 5


@dataclass(frozen=True)
class NoisyInputData:
    """Clean instances ``X`` ``(n, d)``, clean targets ``y`` ``(n,)`` and the task kind."""

    X: np.ndarray
    y: np.ndarray
    classification: bool


def load_noisy_input(name: str, *, n: int = 3000, seed: int = 0, centre: bool = True
                     ) -> NoisyInputData:
    """``n`` clean rounds of a named set (generated from ``seed``) or of a CSV file.

    >>> data = load_noisy_input("friedman1", n=500, seed=0)
    >>> data.X.shape, bool(abs(data.X.mean()) < 1e-12), round(float(data.y.std()), 6)
    ((500, 10), True, 1.0)
    """
    from sklearn import datasets

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    if name == "linear-gaussian":
        X, y = linear_gaussian(n, rng, d=LINEAR_DIM)
    elif name == "friedman1":
        X, y = datasets.make_friedman1(n_samples=n, n_features=10, noise=0.0, random_state=seed)
    elif name == "moons":
        X, labels = datasets.make_moons(n_samples=n, noise=0.1, random_state=seed)
        y = 2.0 * labels - 1.0
    elif name == "circles":
        X, labels = datasets.make_circles(n_samples=n, noise=0.05, factor=0.5, random_state=seed)
        y = 2.0 * labels - 1.0
    else:
        X, y = load_regression(name, n=n, seed=seed)
        values = np.unique(y)
        classification = values.size == 2
        if classification:
            y = np.where(y == values[1], 1.0, -1.0)
        return NoisyInputData(np.asarray(X, float), np.asarray(y, float), classification)
    classification = name in CLASSIFICATION_SETS
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if centre:
        X = X - X.mean(axis=0)
        if not classification:
            y = (y - y.mean()) / y.std()
    return NoisyInputData(X, y, classification)


class CopyOracle:
    """Fresh noisy copies ``x + N(0, std^2 I)`` of a clean instance (the paper's ``A_t``).

    ``queries`` counts every copy handed out.

    >>> oracle = CopyOracle(0.5, np.random.default_rng(0))
    >>> oracle.copies(np.zeros(3), 4).shape, oracle.queries
    ((4, 3), 4)
    """

    def __init__(self, std: float, rng: np.random.Generator) -> None:
        if not (np.isfinite(std) and std >= 0):
            raise ValueError(f"input noise std must be >= 0, got {std}")
        self.std = float(std)
        self.rng = rng
        self.queries = 0

    def copies(self, x: np.ndarray, k: int) -> np.ndarray:
        """``k`` independent noisy copies of ``x``, shape ``(k, d)``."""
        self.queries += k
        return x + self.std * self.rng.standard_normal((k, x.shape[0]))

    def copy(self, x: np.ndarray) -> np.ndarray:
        """One noisy copy of ``x``, shape ``(d,)``."""
        return self.copies(x, 1)[0]
