"""Confusion matrices of class-conditional label noise: validation and estimation (P4 §2.1, §4.2.1).

A confusion matrix ``C`` of ``Q`` classes has entries

    C[p, q] = P(noisy label = p | true class = q)

so rows are noisy labels, columns are true classes and every **column** sums
to 1 (definition (4) of the UMA paper).  UMA solves ``C z = Gamma`` at every
iteration, so ``C`` must be invertible and well conditioned: an
ill-conditioned ``C`` amplifies the sampling noise of ``Gamma`` by up to its
condition number (P4 Algorithm 2 solves with ``C^-1``).

The matrix comes either from the client (validated by :func:`validate_confusion`)
or from *gold* examples: examples whose true class was checked and whose
noisy label is known too.  Their pair counts ``N[p, q] = #{noisy p, true q}``
estimate each column as ``C[:, q] = N[:, q] / sum_p N[p, q]`` (P4
Section 4.2.1), see :func:`estimate_confusion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from app.learners.base import ParamError

#: Largest condition number accepted by default (``cond_max``).
COND_MAX = 1e8

#: Tolerance on the column sums.
SUM_TOL = 1e-6

Orientation = Literal["noisy_by_true", "true_by_noisy"]


def validate_confusion(
    matrix: np.ndarray | Sequence[Sequence[float]],
    n_classes: int,
    *,
    cond_max: float = COND_MAX,
    orientation: Orientation = "noisy_by_true",
    field: str = "confusion",
) -> np.ndarray:
    """Check a confusion matrix and return it as a float64 ``(Q, Q)`` copy, rows = noisy label.

    Parameters
    ----------
    matrix:
        The matrix, ``Q x Q``.
    n_classes:
        ``Q``.
    cond_max:
        Refuse a matrix whose 2-norm condition number exceeds this.
    orientation:
        ``"noisy_by_true"`` (the paper's: ``matrix[p, q] = P(noisy p | true q)``)
        or ``"true_by_noisy"`` (transposed on input).  The orientation is never
        guessed from the sums: a matrix can be row- and column-stochastic.
    field:
        Name reported in the :class:`ParamError`.

    Raises
    ------
    ParamError
        Wrong shape, non-finite or negative entries, a column not summing to
        1, a singular or ill-conditioned matrix; the message says which and
        what to do.

    Examples
    --------
    >>> validate_confusion([[0.8, 0.3], [0.2, 0.7]], 2).sum(axis=0)
    array([1., 1.])
    >>> validate_confusion([[0.5, 0.5], [0.5, 0.5]], 2)
    Traceback (most recent call last):
    ...
    app.learners.base.ParamError: confusion: is singular (noisy labels carry no information ...
    """
    if orientation not in ("noisy_by_true", "true_by_noisy"):
        raise ParamError("orientation", f"must be 'noisy_by_true' or 'true_by_noisy', "
                                        f"got {orientation!r}")
    try:
        C = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParamError(field, "must be a square matrix of numbers") from None
    if C.shape != (n_classes, n_classes):
        raise ParamError(field, f"expected shape ({n_classes}, {n_classes}), got {C.shape}")
    if orientation == "true_by_noisy":
        C = C.T.copy()
    if not np.all(np.isfinite(C)):
        raise ParamError(field, "contains non-finite values")
    if np.any(C < 0):
        raise ParamError(field, "entries are probabilities and must be >= 0")
    sums = C.sum(axis=0)
    bad = np.flatnonzero(np.abs(sums - 1.0) > SUM_TOL)
    if bad.size:
        hint = (" (its rows sum to 1: pass orientation='true_by_noisy' if rows are true classes)"
                if np.allclose(C.sum(axis=1), 1.0, atol=SUM_TOL) else "")
        raise ParamError(field, f"column {int(bad[0])} sums to {sums[bad[0]]:.6g}; every column "
                                f"q must hold P(noisy label = p | true class = q) and sum to 1"
                                f"{hint}")
    cond = float(np.linalg.cond(C))
    if not np.isfinite(cond) or cond > 1e15:
        raise ParamError(field, "is singular (noisy labels carry no information to tell some "
                                "true classes apart), so the noise cannot be inverted")
    if cond > cond_max:
        raise ParamError(field, f"is ill-conditioned (condition number {cond:.3g} > "
                                f"{cond_max:.3g}): inverting it would amplify sampling noise "
                                f"by that factor; the noise is too close to making classes "
                                f"indistinguishable")
    return C


def count_gold(counts: np.ndarray, noisy: np.ndarray | int, true: np.ndarray | int) -> None:
    """Add gold pairs to ``counts`` in place: ``counts[noisy_i, true_i] += 1``."""
    np.add.at(counts, (np.asarray(noisy, dtype=np.int64), np.asarray(true, dtype=np.int64)), 1.0)


def estimate_confusion(counts: np.ndarray, min_per_class: int = 1) -> np.ndarray | None:
    """Column-normalised gold counts: ``C[:, q] = N[:, q] / sum_p N[p, q]`` (P4 Section 4.2.1).

    Returns ``None`` while some true class has fewer than ``min_per_class``
    gold examples: its column would be undefined (or too rough), and a
    missing column makes ``C`` singular.  The result is column-stochastic but
    not validated (it may be singular); pass it to :func:`validate_confusion`.

    Examples
    --------
    >>> N = np.zeros((2, 2))
    >>> count_gold(N, [0, 1, 0, 1], [0, 0, 1, 1])
    >>> estimate_confusion(N)
    array([[0.5, 0.5],
           [0.5, 0.5]])
    >>> estimate_confusion(N, min_per_class=3) is None
    True
    """
    per_class = counts.sum(axis=0)
    if np.any(per_class < max(min_per_class, 1)):
        return None
    return np.asarray(counts / per_class, dtype=np.float64)
