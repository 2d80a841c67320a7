"""Class-conditional label noise for the ``noisy_label`` task (P4 Sections 2.1 and 4.1).

Confusion matrices here follow the library's orientation: ``C[p, q] =
P(noisy label p | true class q)``, columns sum to 1.  The paper's toy
experiment draws *row*-stochastic matrices with rows = true class
(P4 §4.1, against its definition (4)); :func:`toy_reference_matrix` and :func:`toy_family` return
them already transposed.
"""

from __future__ import annotations

import numpy as np


def uniform_confusion(n_classes: int, flip_rate: float) -> np.ndarray:
    """Each label is replaced, with probability ``flip_rate``, by a uniformly drawn *other* class.

    >>> uniform_confusion(3, 0.2)
    array([[0.8, 0.1, 0.1],
           [0.1, 0.8, 0.1],
           [0.1, 0.1, 0.8]])
    """
    if not 0.0 <= flip_rate <= 1.0:
        raise ValueError(f"flip rate must lie in [0, 1], got {flip_rate!r}")
    off = flip_rate / (n_classes - 1)
    return np.asarray((1.0 - flip_rate - off) * np.eye(n_classes) + off)


def next_class_confusion(n_classes: int, rate: float) -> np.ndarray:
    """Each class ``q`` is reported as ``(q + 1) mod Q`` with probability ``rate``.

    >>> next_class_confusion(3, 0.35)
    array([[0.65, 0.  , 0.35],
           [0.35, 0.65, 0.  ],
           [0.  , 0.35, 0.65]])
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must lie in [0, 1], got {rate!r}")
    eye = np.eye(n_classes)
    return np.asarray((1.0 - rate) * eye + rate * np.roll(eye, 1, axis=0))


def corrupt_labels(y: np.ndarray, confusion: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw one noisy label per true label: ``noisy_i ~ confusion[:, y_i]`` (one uniform each).

    >>> rng = np.random.default_rng(0)
    >>> noisy = corrupt_labels(np.zeros(10_000, dtype=int), uniform_confusion(4, 0.3), rng)
    >>> round(float(np.mean(noisy != 0)), 2)
    0.3
    """
    y = np.asarray(y, dtype=np.int64)
    cdf = np.cumsum(np.asarray(confusion, dtype=np.float64)[:, y].T, axis=1)
    u = rng.random(len(y))
    noisy = (u[:, None] >= cdf).sum(axis=1)
    return np.asarray(np.minimum(noisy, confusion.shape[0] - 1), dtype=np.int64)


def gold_mask(y: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Stratified gold subset: ``round(fraction * n_c)`` (at least 1) examples of every class ``c``.

    The paper samples its clean examples per class so that every column of
    the estimated ``C`` is defined (P4 Section 4.2.1).

    >>> mask = gold_mask(np.repeat([0, 1, 2], 100), 0.1, np.random.default_rng(0))
    >>> int(mask.sum()), int(mask[:100].sum())
    (30, 10)
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"gold fraction must lie in [0, 1], got {fraction!r}")
    y = np.asarray(y)
    mask = np.zeros(len(y), dtype=bool)
    if fraction == 0.0:
        return mask
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        take = max(1, round(fraction * members.size))
        mask[rng.choice(members, size=take, replace=False)] = True
    return mask


def circle(n: int, rng: np.random.Generator, n_classes: int = 10, margin: float = 0.025
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paper's toy problem (section 4.1): points on the unit circle, linear labels.

    ``n_classes`` weight vectors ``w_k`` are drawn uniformly on the unit
    circle; ``x`` uniform on the circle is labelled ``argmax_k <w_k, x>`` and
    kept only if ``<w_t - w_p, x> >= margin`` for every ``p != t`` (P4 Section 4.1).

    Returns ``(X, t, W)`` with ``W`` of shape ``(n_classes, 2)``.

    >>> X, t, W = circle(200, np.random.default_rng(0))
    >>> X.shape, bool(np.allclose(np.linalg.norm(X, axis=1), 1))
    ((200, 2), True)
    """
    angles = rng.uniform(0.0, 2 * np.pi, n_classes)
    W = np.c_[np.cos(angles), np.sin(angles)]
    kept: list[np.ndarray] = []
    total = 0
    while total < n:
        a = rng.uniform(0.0, 2 * np.pi, 2 * n)
        X = np.c_[np.cos(a), np.sin(a)]
        S = X @ W.T
        top = np.sort(S, axis=1)
        X = X[top[:, -1] - top[:, -2] >= margin]
        kept.append(X)
        total += len(X)
    X = np.concatenate(kept)[:n]
    return X, (X @ W.T).argmax(axis=1).astype(np.int64), W


def omega(A: np.ndarray) -> np.ndarray:
    """The paper's ``Omega``: zero the negative entries, then normalise the rows."""
    B = np.maximum(A, 0.0)
    return np.asarray(B / B.sum(axis=1, keepdims=True))


def toy_reference_matrix(n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """The toy experiment's ``M``: uniform entries, rows normalised, redrawn until invertible.

    Returned column-stochastic (``M^T`` in the paper's row convention).
    """
    while True:
        M = omega(rng.random((n_classes, n_classes)))
        if np.linalg.cond(M) < 1e8:
            return np.asarray(M.T)


def toy_family(reference: np.ndarray, i: float) -> np.ndarray:
    """``C_i = Omega(I + i N)`` with ``N = (M - I)/10`` (section 4.1); ``C_10 = M``.

    ``reference`` and the result are column-stochastic (transposed from the
    paper's row convention).
    """
    M = reference.T
    eye = np.eye(M.shape[0])
    return np.asarray(omega(eye + i * (M - eye) / 10.0).T)


def confusion_rate(true: np.ndarray, predicted: np.ndarray, n_classes: int) -> float:
    """The paper's confusion rate ``||C_hat||_F / sqrt(Q)`` (section 4), in ``[0, 1]``.

    ``C_hat[p, q] = #{pred p, true q} / #{true q}`` for ``p != q`` and 0 on the
    diagonal; classes absent from ``true`` contribute nothing.

    >>> confusion_rate(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), 2)
    0.35355339059327373
    """
    counts = np.zeros((n_classes, n_classes))
    np.add.at(counts, (np.asarray(predicted), np.asarray(true)), 1.0)
    per_class = counts.sum(axis=0)
    rates = np.divide(counts, per_class, out=np.zeros_like(counts), where=per_class > 0)
    np.fill_diagonal(rates, 0.0)
    return float(np.linalg.norm(rates) / np.sqrt(n_classes))
