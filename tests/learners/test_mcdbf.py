"""MC-SLP and MC-DBF (P2 Algorithms 1-2): tau constants, ordered draw, exact unbiasedness,
reductions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from app.learners.banditron import Banditron
from app.learners.base import ParamError, stack_events
from app.learners.linear import lo_coefficients
from app.learners.mcdbf import (
    MCDBF,
    MCSLP,
    label_probabilities,
    ordered_draw,
    ordered_log_prob,
    tau_constants,
    top_m,
)
from app.learners.perceptron import Perceptron
from app.sim.datasets import load_classification
from app.sim.feedback import set_contains

SIZES = [(5, 2), (6, 3), (7, 4), (4, 3), (5, 1), (9, 3)]


@pytest.mark.parametrize("k, m, tau1, tau2", [
    (10, 3, 168, 2 / 7), (10, 2, 16, 1 / 8), (5, 4, 24, 3.0), (8, 7, math.factorial(7), 6.0),
    (12, 11, math.factorial(11), 10.0), (6, 1, 1, 0.0),
])
def test_tau_constants_match_spec_values(k: int, m: int, tau1: int, tau2: float) -> None:
    log_tau1, t2 = tau_constants(k, m)
    assert math.exp(log_tau1) == pytest.approx(tau1, rel=1e-12)
    assert t2 == pytest.approx(tau2, rel=1e-15)


def test_tau_constants_do_not_overflow_for_large_k() -> None:
    log_tau1, _ = tau_constants(1000, 400)
    assert math.isfinite(log_tau1) and log_tau1 > 709  # tau1 itself would overflow float64


def _greedy_sets(k: int, m: int) -> list[np.ndarray]:
    return [np.arange(m), np.arange(k - 1, k - 1 - m, -1),
            np.random.default_rng(k * m).permutation(k)[:m]]


@pytest.mark.parametrize("k, m", SIZES)
def test_ordered_draw_probabilities_sum_to_one(k: int, m: int) -> None:
    for greedy, gamma in itertools.product(_greedy_sets(k, m), (0.05, 0.3, 1.0)):
        total = sum(math.exp(ordered_log_prob(t, greedy, gamma, k))
                    for t in itertools.permutations(range(k), m))
        assert total == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("k, m", SIZES)
def test_mcdbf_update_exactly_unbiased_for_mcslp_update(k: int, m: int) -> None:
    gamma = 0.2
    model = MCDBF(n_features=1, n_classes=k, m=m, gamma=gamma)
    slp = MCSLP(n_features=1, n_classes=k, m=m)
    tuples = np.array(list(itertools.permutations(range(k), m)))
    for greedy in _greedy_sets(k, m):
        log_z = np.array([ordered_log_prob(t, greedy, gamma, k) for t in tuples])
        for y in range(k):
            batch = {"played": tuples, "greedy": np.tile(greedy, (len(tuples), 1)),
                     "log_prob": log_z, "click": set_contains(tuples, np.full(len(tuples), y))}
            expected = np.exp(log_z) @ lo_coefficients(k, model.terms(batch))
            target = lo_coefficients(k, slp.terms({"label": np.array([y]),
                                                   "greedy": greedy[None, :]}))[0]
            np.testing.assert_allclose(expected, target, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_ordered_draw_frequencies_match_z() -> None:
    k, m, gamma, n = 5, 2, 0.4, 60_000
    greedy = np.array([3, 1])
    rng = np.random.default_rng(0)
    tuples = list(itertools.permutations(range(k), m))
    index = {t: i for i, t in enumerate(tuples)}
    counts = np.zeros(len(tuples))
    for _ in range(n):
        played, log_z = ordered_draw(rng, greedy, gamma, k)
        counts[index[tuple(int(b) for b in played)]] += 1
        assert log_z == ordered_log_prob(played, greedy, gamma, k)
    expected = n * np.exp([ordered_log_prob(t, greedy, gamma, k) for t in tuples])
    assert stats.chisquare(counts, expected).pvalue > 1e-4


def test_label_probabilities_sum_to_one_with_floor() -> None:
    p = label_probabilities(np.array([4, 0, 2]), 0.3, 7)
    assert p.sum() == pytest.approx(1.0, abs=1e-15)
    assert p.min() == pytest.approx(0.3 / 7)


def test_top_m_breaks_ties_to_lower_index() -> None:
    np.testing.assert_array_equal(top_m(np.array([1.0, 3.0, 1.0, 3.0, 0.0]), 3), [1, 3, 0])


def _run(model: MCDBF | Banditron, X: np.ndarray, y: np.ndarray) -> list[tuple[int, ...]]:
    decisions = []
    for x, label in zip(X, y, strict=True):
        ctx = model.decide(x).context
        played = np.atleast_1d(ctx["played"])
        model.learn_one({**ctx, "click": float(label in played)})
        decisions.append((*np.atleast_1d(ctx["greedy"]).tolist(), *played.tolist()))
    return decisions


def test_mcdbf_with_m_1_equals_banditron() -> None:
    X, y = load_classification("synsep", n=1500, seed=2)
    mcdbf = MCDBF(n_features=400, n_classes=9, seed=4, m=1, gamma=0.1)
    banditron = Banditron(n_features=400, n_classes=9, seed=4, gamma=0.1)
    assert _run(mcdbf, X, y) == _run(banditron, X, y)
    np.testing.assert_allclose(mcdbf.W_, banditron.W_, rtol=1e-12, atol=1e-12)


def test_mcdbf_tau2_term_does_not_change_predictions() -> None:
    X, y = load_classification("synsep", n=800, seed=2)
    with_term = MCDBF(n_features=400, n_classes=9, seed=4, m=3, gamma=0.2)
    without = MCDBF(n_features=400, n_classes=9, seed=4, m=3, gamma=0.2, tau2_term=False)
    assert _run(with_term, X, y) == _run(without, X, y)
    assert not np.allclose(with_term.W_, without.W_)


def test_mcslp_with_m_1_equals_perceptron() -> None:
    X, y = load_classification("synsep", n=500, seed=2)
    slp, perceptron = MCSLP(n_features=400, n_classes=9, m=1), Perceptron(n_features=400,
                                                                          n_classes=9)
    for model in (slp, perceptron):
        events = [{**model.decide(x).context, "label": label} for x, label in zip(X, y,
                                                                                  strict=True)]
        for event in events:
            model.learn_one(event)
    np.testing.assert_array_equal(slp.W_, perceptron.W_)


def test_mcslp_update_keeps_row_sum() -> None:
    rng = np.random.default_rng(0)
    model = MCSLP(n_features=6, n_classes=5, m=3)
    for _ in range(50):
        model.learn_one({**model.decide(rng.standard_normal(6)).context,
                         "label": int(rng.integers(5))})
    np.testing.assert_allclose(model.W_.sum(axis=0), 0.0, atol=1e-12)


def test_mcdbf_logs_ordered_draw_and_its_probability() -> None:
    model = MCDBF(n_features=3, n_classes=6, seed=0, m=3, gamma=0.5)
    decision = model.decide(np.array([1.0, 0.0, 0.0]))
    ctx = decision.context
    assert ctx["played"].shape == (3,) and len(set(ctx["played"].tolist())) == 3
    assert ctx["log_prob"] == pytest.approx(ordered_log_prob(ctx["played"], ctx["greedy"],
                                                             0.5, 6))
    assert decision.output["probability"] == pytest.approx(math.exp(ctx["log_prob"]))
    assert decision.output["labels"] == ctx["played"].tolist()


@pytest.mark.parametrize("kwargs, field", [
    ({"m": 0}, "m"), ({"m": 6}, "m"), ({"gamma": 0.0}, "gamma"), ({"gamma": 1.1}, "gamma"),
])
def test_mcdbf_refuses_invalid_params(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ParamError) as info:
        MCDBF(n_features=3, n_classes=6, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_mcdbf_refuses_non_binary_click_and_mcslp_bad_label() -> None:
    model = MCDBF(n_features=3, n_classes=6)
    event = {**model.decide(np.ones(3)).context, "click": 0.5}
    with pytest.raises(ParamError, match="click"):
        model.learn_one(event)
    slp = MCSLP(n_features=3, n_classes=6)
    with pytest.raises(ParamError, match="label"):
        slp.learn_many(stack_events([{**slp.decide(np.ones(3)).context, "label": 6}]))
