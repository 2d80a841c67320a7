"""Confusion matrices: validation (P4 definition (4)) and estimation from gold pairs (P4 §4.2.1)."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.confusion import count_gold, estimate_confusion, validate_confusion
from app.sim.noisy_labels import corrupt_labels, next_class_confusion, uniform_confusion


def test_validate_accepts_column_stochastic_and_copies() -> None:
    C = next_class_confusion(4, 0.35)
    out = validate_confusion(C, 4)
    np.testing.assert_array_equal(out, C)
    assert not np.shares_memory(out, C)


def test_validate_transposes_true_by_noisy() -> None:
    C = next_class_confusion(3, 0.2)
    np.testing.assert_array_equal(validate_confusion(C.T, 3, orientation="true_by_noisy"), C)


def test_validate_refuses_rows_summing_to_one_with_hint() -> None:
    R = np.array([[0.6, 0.4, 0.0], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    with pytest.raises(ParamError, match="orientation='true_by_noisy'"):
        validate_confusion(R, 3)


def test_validate_refuses_negative_and_wrong_shape() -> None:
    with pytest.raises(ParamError, match=">= 0"):
        validate_confusion([[1.2, 0.0], [-0.2, 1.0]], 2)
    with pytest.raises(ParamError, match="shape"):
        validate_confusion(np.eye(3), 2)


def test_validate_refuses_singular() -> None:
    with pytest.raises(ParamError, match="singular"):
        validate_confusion(uniform_confusion(4, 0.75), 4)  # every column the same


def test_validate_refuses_ill_conditioned_with_condition_number() -> None:
    C = uniform_confusion(4, 0.75 - 1e-9)
    with pytest.raises(ParamError, match="ill-conditioned"):
        validate_confusion(C, 4)
    with pytest.raises(ParamError, match="ill-conditioned"):
        validate_confusion(uniform_confusion(4, 0.6), 4, cond_max=5.0)


def test_estimate_waits_for_every_class() -> None:
    N = np.zeros((3, 3))
    count_gold(N, [0, 1, 1], [0, 1, 1])
    assert estimate_confusion(N) is None
    count_gold(N, 2, 2)
    np.testing.assert_array_equal(estimate_confusion(N), np.eye(3))


@pytest.mark.parametrize("m", [100, 10_000])
def test_estimate_from_gold_converges_to_true_confusion(m: int) -> None:
    rng = np.random.default_rng(7)
    C = next_class_confusion(5, 0.35) * 0.9 + 0.1 * uniform_confusion(5, 0.4)
    true = np.repeat(np.arange(5), m)
    N = np.zeros((5, 5))
    count_gold(N, corrupt_labels(true, C, rng), true)
    estimate = estimate_confusion(N)
    assert estimate is not None
    se = np.sqrt(C * (1 - C) / m)  # binomial standard error of each entry
    assert np.all(np.abs(estimate - C) <= 4 * se + 1e-12)
    validate_confusion(estimate, 5)
