"""Tests of the label-budget strategies: labels asked per round against the budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.budget import STRATEGIES, TUNE_TARGET, LabelBudget, make_budget


def _spend(strategy: LabelBudget, deltas: np.ndarray) -> list[int]:
    """Run one round per residual ``ỹ - ŷ``; return the extra labels of each round."""
    return [strategy.labels_wanted(float(d), 0.0) for d in deltas]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [1.2, 1.5, 2.0, 3.7])
@pytest.mark.parametrize("scale", [0.01, 1.0, 1e3])
def test_self_tuned_never_exceeds_budget(budget: float, scale: float) -> None:
    strategy = make_budget("auto_self_tuned", budget, seed=1)
    rng = np.random.default_rng(2)
    # Residuals whose scale jumps by 1e4 half-way: a is badly tuned twice.
    deltas = rng.normal(0, scale, 20_000) * np.where(np.arange(20_000) < 10_000, 1.0, 100.0)
    used = 0
    for t, extra in enumerate(_spend(strategy, deltas), start=1):
        used += 1 + extra
        assert used <= budget * t
    assert used == strategy.labels_used


@pytest.mark.parametrize("budget", [1.5, 2.0, 3.0])
def test_self_tuned_ends_near_limited_budget(budget: float) -> None:
    """The self-tuned strategy spends within a few percent of 0.95·B on a stationary stream."""
    strategy = make_budget("auto_self_tuned", budget, seed=4)
    _spend(strategy, np.random.default_rng(5).normal(0, 1, 20_000))
    running = strategy.labels_used / strategy.rounds
    assert abs(running - TUNE_TARGET * budget) < 0.03 * budget


def test_self_tuned_adapts_a_per_block() -> None:
    strategy = make_budget("auto_self_tuned", 2.0, seed=0)
    _spend(strategy, np.full(99, 100.0))
    assert strategy.a == 1.0
    _spend(strategy, np.full(1, 100.0))
    assert strategy.a == 2.0          # spent ~2 per round > 1.9: fewer k-label rounds
    _spend(strategy, np.zeros(1000))
    assert strategy.a < 2.0           # now far below the target: halved


@pytest.mark.slow
@pytest.mark.parametrize("budget", [1.3, 2.0, 2.5])
def test_const_spends_budget_in_expectation(budget: float) -> None:
    n = 20_000
    strategy = make_budget("const", budget, seed=7, hard_cap=False)
    _spend(strategy, np.zeros(n))
    k = math.ceil(budget)
    p = (budget - 1) / (k - 1)
    sd = (k - 1) * math.sqrt(n * p * (1 - p))
    assert abs(strategy.labels_used - budget * n) < 4 * max(sd, 1.0)


def test_const_with_cap_stays_within_budget() -> None:
    strategy = make_budget("const", 1.5, seed=3)
    extras = _spend(strategy, np.zeros(5000))
    assert np.all(np.cumsum(1 + np.array(extras)) <= 1.5 * np.arange(1, 5001))
    assert strategy.labels_used > 0.97 * 1.5 * 5000


@pytest.mark.parametrize(("budget", "n"), [(1.5, 1000), (2.4, 777), (3.0, 10)])
def test_begin_spends_exact_count(budget: float, n: int) -> None:
    strategy = make_budget("begin", budget, horizon=n, seed=0)
    extras = _spend(strategy, np.zeros(n))
    k = math.ceil(budget)
    front = math.floor(n * (budget - 1) / (k - 1))
    assert strategy.labels_used == front * (k - 1) + n
    assert all(e == k - 1 for e in extras[:front]) and not any(extras[front:])


def test_auto_asks_more_for_larger_residuals() -> None:
    strategy = make_budget("auto", 2.0, a=1.0, seed=0, hard_cap=False)
    assert sum(_spend(strategy, np.zeros(500))) == 0
    big = sum(_spend(strategy, np.full(2000, 3.0)))
    # Probability of k labels: 9/(1+9) = 0.9; 4 standard errors of 2000 draws.
    assert abs(big / 2000 - 0.9) < 4 * math.sqrt(0.09 / 2000)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_budget_one_never_asks(strategy: str) -> None:
    budget = make_budget(strategy, 1.0, horizon=100, seed=0)
    assert sum(_spend(budget, np.full(300, 50.0))) == 0
    assert budget.labels_used == 300


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_state_roundtrip_continues_identically(strategy: str) -> None:
    deltas = np.random.default_rng(9).normal(0, 1.5, 700)
    original = make_budget(strategy, 2.5, horizon=700, seed=11)
    _spend(original, deltas[:350])
    restored = make_budget(strategy, 2.5, horizon=700, seed=11)
    restored.set_state(original.get_state())
    assert _spend(restored, deltas[350:]) == _spend(original, deltas[350:])


def test_same_seed_same_decisions() -> None:
    deltas = np.random.default_rng(0).normal(0, 1, 500)
    runs = [_spend(make_budget("auto", 2.0, seed=5), deltas) for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("strategy", "kwargs", "field"), [
    ("const", {"budget": 0.99}, "budget"),
    ("const", {"budget": float("nan")}, "budget"),
    ("auto", {"budget": float("inf")}, "budget"),
    ("auto", {"budget": 2.0, "a": 0.0}, "a"),
    ("auto", {"budget": 2.0, "a": -1.0}, "a"),
    ("begin", {"budget": 2.0}, "horizon"),
    ("begin", {"budget": 2.0, "horizon": 0}, "horizon"),
    ("random", {"budget": 2.0}, "budget_strategy"),
])
def test_make_budget_refuses_invalid_settings(strategy: str, kwargs: dict[str, float],
                                              field: str) -> None:
    with pytest.raises(ParamError) as info:
        make_budget(strategy, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_auto_refuses_non_finite_residual() -> None:
    with pytest.raises(ParamError):
        make_budget("auto", 2.0, seed=0).labels_wanted(float("inf"), 0.0)
