"""Banditron, RCNBF and RCINE: unbiasedness, reductions, exploration, guards (P1 Algorithms 1-2;
Kakade et al. 2008)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.learners.banditron import Banditron
from app.learners.base import ParamError, stack_events
from app.learners.linear import explore_draw, lo_coefficients
from app.learners.rcnbf import RCINE, RCNBF
from app.sim.datasets import load_classification
from app.sim.feedback import noisy_clicks, set_contains

SETTINGS = [(3, 0.1, 0.0, 0.0), (5, 0.2, 0.2, 0.4), (9, 0.05, 0.3, 0.1), (10, 0.3, 0.1, 0.5)]


def _explore_law(greedy: int, gamma: float, k: int) -> np.ndarray:
    p = np.full(k, gamma / k)
    p[greedy] += 1.0 - gamma
    return p


def _all_outcomes(k: int, gamma: float, rho0: float, rho1: float, y: int, greedy: int
                  ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every (played, noisy click) with its probability, as a columnar batch."""
    p = _explore_law(greedy, gamma, k)
    rows, weights = [], []
    for played, f_noisy in itertools.product(range(k), (0.0, 1.0)):
        f = float(played == y)
        p_noise = (rho1 if f_noisy == 0 else 1 - rho1) if f else (rho0 if f_noisy else 1 - rho0)
        rows.append({"played": played, "click": f_noisy, "greedy": greedy, "prob": p[played]})
        weights.append(p[played] * p_noise)
    return stack_events(rows), np.array(weights)


@pytest.mark.parametrize("k, gamma, rho0, rho1", SETTINGS)
def test_rcnbf_update_exactly_unbiased_for_perceptron_update(
        k: int, gamma: float, rho0: float, rho1: float) -> None:
    model = RCNBF(n_features=1, n_classes=k, gamma=gamma, rho0=rho0, rho1=rho1)
    for y, greedy in itertools.product(range(k), range(k)):
        batch, w = _all_outcomes(k, gamma, rho0, rho1, y, greedy)
        assert w.sum() == pytest.approx(1.0, abs=1e-14)
        expected = w @ lo_coefficients(k, model.terms(batch))
        target = np.eye(k)[y] - np.eye(k)[greedy]
        np.testing.assert_allclose(expected, target, rtol=0, atol=1e-12)


def test_rcnbf_update_monte_carlo_within_4se() -> None:
    k, gamma, rho0, rho1, n, y, greedy = 9, 0.1, 0.2, 0.4, 1_000_000, 4, 2
    rng = np.random.default_rng(0)
    p = _explore_law(greedy, gamma, k)
    played = rng.choice(k, size=n, p=p)
    click = noisy_clicks(set_contains(played, np.full(n, y)), rho0, rho1, rng)
    model = RCNBF(n_features=1, n_classes=k, gamma=gamma, rho0=rho0, rho1=rho1)
    C = lo_coefficients(k, model.terms({"played": played, "click": click,
                                        "greedy": np.full(n, greedy), "prob": p[played]}))
    se = C.std(axis=0) / np.sqrt(n)
    target = np.eye(k)[y] - np.eye(k)[greedy]
    assert np.all(np.abs(C.mean(axis=0) - target) <= 4 * se + 1e-12)


@pytest.mark.parametrize("k, gamma, rho0, rho1", SETTINGS)
def test_rcnbf_second_moment_within_lemma3_bound(k: int, gamma: float, rho0: float,
                                                  rho1: float) -> None:
    beta = 1 - rho0 - rho1
    a1 = (2 * k / gamma + 2 * rho0 * (1 - rho0) * k / (beta * gamma)
          + k * rho1 / (beta ** 2 * gamma) + rho0 * (1 - rho0) * k ** 2 / (beta ** 2 * gamma ** 2))
    a2 = (2 * gamma + rho1 / (beta ** 2 * (1 - gamma))
          + rho0 * (1 - rho0) * k ** 2 / (beta ** 2 * gamma))
    model = RCNBF(n_features=1, n_classes=k, gamma=gamma, rho0=rho0, rho1=rho1)
    for y, greedy in itertools.product(range(k), range(k)):
        batch, w = _all_outcomes(k, gamma, rho0, rho1, y, greedy)
        second = w @ (lo_coefficients(k, model.terms(batch)) ** 2).sum(axis=1)
        assert second <= (a2 if y == greedy else a1) + 1e-9


def _stream(model: Banditron, X: np.ndarray, y: np.ndarray, rng: np.random.Generator,
            rho: tuple[float, float] = (0.2, 0.4)) -> list[tuple[int, int]]:
    decisions = []
    for x, label in zip(X, y, strict=True):
        ctx = model.decide(x).context
        click = noisy_clicks(np.array(float(ctx["played"] == label)), *rho, rng)
        model.learn_one({**ctx, "click": float(click)})
        decisions.append((int(ctx["greedy"]), int(ctx["played"])))
    return decisions


def test_rcnbf_without_noise_equals_banditron() -> None:
    X, y = load_classification("synsep", n=1500, seed=4)
    rcnbf = RCNBF(n_features=400, n_classes=9, seed=7, gamma=0.1)
    banditron = Banditron(n_features=400, n_classes=9, seed=7, gamma=0.1)
    a = _stream(rcnbf, X, y, np.random.default_rng(1))
    b = _stream(banditron, X, y, np.random.default_rng(1))
    assert a == b
    np.testing.assert_array_equal(rcnbf.W_, banditron.W_)


def test_rcine_starts_as_banditron_and_uses_new_rates_for_later_updates() -> None:
    X, y = load_classification("synsep", n=600, seed=4)
    rcine = RCINE(n_features=400, n_classes=9, seed=3, gamma=0.1, n_s=90)
    banditron = Banditron(n_features=400, n_classes=9, seed=3, gamma=0.1)
    assert _stream(rcine, X[:300], y[:300], np.random.default_rng(1)) == _stream(
        banditron, X[:300], y[:300], np.random.default_rng(1))
    np.testing.assert_array_equal(rcine.W_, banditron.W_)
    rcine.set_noise_rates(0.2, 0.4)
    rcnbf = RCNBF(n_features=400, n_classes=9, seed=3, gamma=0.1, rho0=0.2, rho1=0.4)
    rcnbf.W_ = rcine.W_.copy()
    event = {**rcine.decide(X[300]).context, "click": 0.0}
    rcine.learn_one(event)
    rcnbf.learn_one(event)
    np.testing.assert_array_equal(rcine.W_, rcnbf.W_)
    np.testing.assert_array_equal(rcine.get_state()["noise_rates_"], [0.2, 0.4])


def test_rcine_refuses_rates_below_beta_min_and_small_n_s() -> None:
    model = RCINE(n_features=3, n_classes=4, beta_min=0.2)
    with pytest.raises(ParamError, match="rho1"):
        model.set_noise_rates(0.4, 0.45)
    with pytest.raises(ParamError, match="n_s"):
        RCINE(n_features=3, n_classes=4, n_s=39)
    assert RCINE(n_features=3, n_classes=4, n_s=40).n_s == 40
    with pytest.raises(ParamError, match="percentile"):
        RCINE(n_features=3, n_classes=4, percentile=0.0)


@pytest.mark.parametrize("kwargs, field", [
    ({"gamma": 0.0}, "gamma"), ({"gamma": 1.0}, "gamma"), ({"rho0": 0.6, "rho1": 0.395}, "rho1"),
    ({"rho0": 1.0}, "rho0"), ({"n_classes": 1}, "n_classes"), ({"n_features": 0}, "n_features"),
])
def test_rcnbf_refuses_invalid_params(kwargs: dict[str, float], field: str) -> None:
    params = {"n_features": 3, "n_classes": 4, **kwargs}
    with pytest.raises(ParamError) as info:
        RCNBF(**params)  # type: ignore[arg-type]
    assert info.value.field == field


def test_rcnbf_refuses_non_binary_click_and_near_zero_beta_rates() -> None:
    model = RCNBF(n_features=3, n_classes=4, rho0=0.1)
    event = {**model.decide(np.ones(3)).context, "click": 0.5}
    with pytest.raises(ParamError, match="click"):
        model.learn_one(event)
    with pytest.raises(ParamError, match="click"):
        model.learn_many(stack_events([event]))
    with pytest.raises(ParamError, match="rho1"):
        model.set_noise_rates(0.5, 0.495)
    state = model.get_state()
    with pytest.raises(ParamError, match="rho"):
        model.set_state({**state, "noise_rates_": np.array([0.7, 0.3])})


def test_explore_draw_matches_exploration_law() -> None:
    rng = np.random.default_rng(5)
    k, gamma, greedy, n = 6, 0.3, 2, 200_000
    draws = [explore_draw(rng, greedy, gamma, k) for _ in range(n)]
    played = np.array([d[0] for d in draws])
    law = _explore_law(greedy, gamma, k)
    np.testing.assert_allclose([d[1] for d in draws], law[played])
    freq = np.bincount(played, minlength=k) / n
    assert np.all(np.abs(freq - law) <= 4 * np.sqrt(law * (1 - law) / n))


def test_banditron_explores_at_rate_gamma_times_k_minus_1_over_k() -> None:
    model = Banditron(n_features=2, n_classes=5, seed=0, gamma=0.2)
    x = np.array([1.0, 0.0])
    n = 20_000
    off = np.mean([model.decide(x).output["label"] != 0 for _ in range(n)])
    rate = 0.2 * 4 / 5
    assert abs(off - rate) <= 4 * np.sqrt(rate * (1 - rate) / n)


def test_banditron_update_uses_logged_probability() -> None:
    model = Banditron(n_features=2, n_classes=3, gamma=0.3)
    x = np.array([0.6, 0.8])
    model.learn_one({"x": x, "greedy": 0, "played": 2, "prob": 0.1, "click": 1.0})
    np.testing.assert_allclose(model.W_, [-x, np.zeros(2), 10 * x])
