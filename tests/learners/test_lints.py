"""Numeric tests of diagonal linear Thompson sampling (app/learners/lints.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from app.learners.base import ParamError, stack_events
from app.learners.lints import LinTSDiag, normal_cdf, thompson_probabilities


def test_normal_cdf_matches_erf() -> None:
    u = np.linspace(-6.0, 6.0, 241)
    exact = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in u])
    np.testing.assert_allclose(normal_cdf(u), exact, atol=2e-7)


def test_thompson_probabilities_match_sampled_argmax() -> None:
    rng = np.random.default_rng(0)
    mean = np.array([0.3, 0.5, 0.45, 0.1])
    scale = np.array([0.2, 0.05, 0.1, 0.3])
    p = thompson_probabilities(mean, scale)
    n = 200_000
    wins = np.bincount((mean + scale * rng.normal(size=(n, 4))).argmax(axis=1), minlength=4)
    se = np.sqrt(p * (1.0 - p) / n)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.abs(wins / n - p) < 4 * se + 1e-4), (wins / n, p)


def test_lints_logs_the_propensity_it_draws_with() -> None:
    model = LinTSDiag(n_features=2, n_classes=3, seed=4, scale=0.3)
    model.learn_many(stack_events([
        {"x": np.array([1.0, 0.0]), "played": a, "click": c}
        for a, c in [(0, 1.0), (0, 0.0), (1, 1.0), (2, 0.0), (1, 0.0), (0, 1.0)]]))
    x = np.array([1.0, 0.0])
    p = model.probabilities(x)
    assert np.all(p > 0.01)
    n = 10_000
    counts = np.zeros(3)
    for _ in range(n):
        d = model.decide(x)
        assert d.output["probability"] == float(d.context["prob"]) == p[d.output["label"]]
        counts[d.output["label"]] += 1
    assert float(np.sum((counts - n * p) ** 2 / (n * p))) < chi2.ppf(0.999, df=2)


def test_learn_many_equals_sequential() -> None:
    rng = np.random.default_rng(1)
    events = [{"x": rng.normal(size=4), "played": int(rng.integers(3)),
               "click": float(rng.random() < 0.3)} for _ in range(200)]
    seq = LinTSDiag(n_features=4, n_classes=3)
    for e in events:
        seq.learn_one(e)
    bat = LinTSDiag(n_features=4, n_classes=3)
    bat.learn_many(stack_events(events))
    for name, value in seq.get_state().items():
        np.testing.assert_allclose(bat.get_state()[name], value, rtol=1e-12, atol=1e-14)


def test_init_refuses_too_many_classes_and_negative_scale() -> None:
    with pytest.raises(ParamError, match="max_classes"):
        LinTSDiag(n_features=2, n_classes=101)
    with pytest.raises(ParamError, match="scale"):
        LinTSDiag(n_features=2, n_classes=3, scale=-0.1)


def test_thompson_probabilities_drop_hopeless_labels() -> None:
    mean, scale = np.array([1.0, 0.0, 0.99]), np.array([0.01, 0.01, 0.01])
    p = thompson_probabilities(mean, scale)
    assert p[1] == 0.0
    np.testing.assert_allclose(p[[0, 2]], thompson_probabilities(mean[[0, 2]], scale[[0, 2]]))
    assert p[0] == pytest.approx(normal_cdf(np.array([0.01 / (0.01 * np.sqrt(2.0))]))[0])
