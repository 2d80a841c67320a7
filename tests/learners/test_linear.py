"""Shared LO machinery: the fast row update of one event."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.linear import Terms, explore_decision, explore_decisions, lo_update_one


@pytest.mark.parametrize("up, down", [(1, 2), (2, 2), (np.int64(0), np.int64(3))])
def test_lo_update_one_fast_path_equals_general_path(up: int, down: int) -> None:
    rng = np.random.default_rng(2)
    W0, x = rng.standard_normal((4, 5)), rng.standard_normal(5)
    fast, general = W0.copy(), W0.copy()
    lo_update_one(fast, x, Terms(up, 1.7, down))
    lo_update_one(general, x, Terms(np.array([up]), np.array([1.7]), np.array([down])))
    np.testing.assert_array_equal(fast, general)


def _looped(W: np.ndarray, X: np.ndarray, seed: int, explore: bool = True) -> list:
    rng = np.random.default_rng(seed)
    return [explore_decision(W, x, rng, 0.3, explore) for x in X]


def _batched(W: np.ndarray, X: np.ndarray, seed: int, explore: bool = True) -> list:
    return explore_decisions(W, X, np.random.default_rng(seed), 0.3, explore)


def _same(a: list, b: list) -> None:
    assert [d.output for d in a] == [d.output for d in b]
    for da, db in zip(a, b, strict=True):
        assert da.context.keys() == db.context.keys()
        assert all(np.array_equal(da.context[k], db.context[k]) for k in da.context)


def test_explore_decisions_equals_loop_on_exact_and_near_ties() -> None:
    rng = np.random.default_rng(0)
    W = rng.standard_normal((6, 50))
    X = rng.standard_normal((400, 50))
    X[:100] = 0.0  # every score 0: ties go to label 0
    W[3] = W[1] * (1 + 1e-15)  # rows 1 and 3 nearly tie on every input
    _same(_batched(W, X, seed=7), _looped(W, X, seed=7))
    _same(_batched(W, X, seed=7, explore=False), _looped(W, X, seed=7, explore=False))
    _same(_batched(np.zeros((3, 50)), X, seed=1), _looped(np.zeros((3, 50)), X, seed=1))


def test_explore_decisions_bad_row_raises_after_the_same_draws() -> None:
    W = np.random.default_rng(1).standard_normal((3, 4))
    X = np.ones((5, 4))
    X[3, 2] = np.nan
    rngs = [np.random.default_rng(2), np.random.default_rng(2)]
    with pytest.raises(ParamError, match="features"):
        explore_decisions(W, X, rngs[0], 0.3, True)
    with pytest.raises(ParamError, match="features"):
        [explore_decision(W, x, rngs[1], 0.3, True) for x in X]
    assert rngs[0].random() == rngs[1].random()
    with pytest.raises(ParamError, match="features"):
        explore_decisions(W, np.ones((2, 5)), rngs[0], 0.3, True)
    X[3, 2] = 1e300  # finite, but the scores overflow: the loop's answer
    with np.errstate(over="ignore", invalid="ignore"):
        _same(_batched(W, X, seed=3), _looped(W, X, seed=3))
