"""Numeric tests of diagonal linear Thompson sampling (app/learners/lints.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from app.learners.base import ParamError, stack_events
from app.learners.lints import LinTSDiag, normal_cdf, thompson_probabilities
from app.learners.noise_anchor import NO_EXPLORATION, ProgressiveScorer, estimate_from_anchors
from app.sim.feedback import noisy_clicks


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


@pytest.mark.slow
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


def _hopeless_model(uniform_share: float) -> LinTSDiag:
    """Three labels where Thompson sampling gives label 1 probability 0 at ``x = (1, 0)``."""
    model = LinTSDiag(n_features=2, n_classes=3, seed=5, scale=0.01,
                      uniform_share=uniform_share)
    model.learn_many(stack_events(
        [{"x": np.array([1.0, 0.0]), "played": a, "click": c}
         for _ in range(200) for a, c in [(0, 1.0), (1, 0.0), (2, 1.0), (2, 0.0)]]))
    return model


@pytest.mark.slow
def test_uniform_share_gives_every_label_its_share_and_logs_the_mixture() -> None:
    x = np.array([1.0, 0.0])
    pure = _hopeless_model(0.0).probabilities(x)
    assert pure[1] == 0.0
    model = _hopeless_model(0.2)
    p = model.probabilities(x)
    np.testing.assert_allclose(p, 0.8 * pure + 0.2 / 3, rtol=1e-12)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    n = 6_000
    counts = np.zeros(3)
    for _ in range(n):
        d = model.decide(x)
        assert d.output["probability"] == float(d.context["prob"]) == p[d.output["label"]]
        counts[d.output["label"]] += 1
    assert counts[1] > 0
    assert float(np.sum((counts - n * p) ** 2 / (n * p))) < chi2.ppf(0.999, df=2)


def test_uniform_share_with_zero_scale_mixes_the_greedy_label() -> None:
    model = LinTSDiag(n_features=2, n_classes=4, seed=0, scale=0.0, uniform_share=0.2)
    model.learn_one({"x": np.array([1.0, 0.0]), "played": 2, "click": 1.0})
    np.testing.assert_allclose(model.probabilities(np.array([1.0, 0.0])),
                               [0.05, 0.05, 0.85, 0.05])
    greedy = LinTSDiag(n_features=2, n_classes=4, scale=0.0, uniform_share=0.0)
    assert greedy.decide(np.array([1.0, 0.0])).output["probability"] == 1.0


@pytest.mark.parametrize("share", [1.0, -0.01])
def test_init_refuses_uniform_share_outside_unit_interval(share: float) -> None:
    with pytest.raises(ParamError, match="uniform_share"):
        LinTSDiag(n_features=2, n_classes=3, uniform_share=share)


@pytest.mark.slow
@pytest.mark.parametrize(("share", "supported"), [(0.05, True), (0.0, False)])
def test_anchor_estimator_takes_lints_plays_only_with_a_uniform_share(
        share: float, supported: bool) -> None:
    """Prototype stream, 6 labels, clicks flipped at (0.2, 0.3): with the default share the
    uniform anchor exists (mean importance weight near 1), without it the estimate is refused."""
    rng = np.random.default_rng(11)
    k, d, n = 6, 12, 6_000
    protos = rng.normal(size=(k, d))
    model = LinTSDiag(n_features=d, n_classes=k, seed=2, uniform_share=share)
    scorer = ProgressiveScorer(d, k)
    prob, score, click = [], [], []
    for _ in range(n // 500):
        y = rng.integers(k, size=500)
        X = protos[y] + rng.normal(scale=0.5, size=(500, d))
        decisions = [model.decide(x) for x in X]
        played = np.array([dec.output["label"] for dec in decisions])
        f = noisy_clicks((played == y).astype(float), 0.2, 0.3, rng)
        model.learn_many(stack_events([{**dec.context, "click": c}
                                       for dec, c in zip(decisions, f, strict=True)]))
        prob.append([dec.output["probability"] for dec in decisions])
        score.append(scorer.score_and_learn(X, played, f))
        click.append(f)
    est = estimate_from_anchors(np.concatenate(prob), np.concatenate(score),
                                np.concatenate(click), k)
    if supported:
        assert est.reason != NO_EXPLORATION and est.support > 0.9, est
        assert abs(est.raw_rho0 - 0.2) < 0.06 and abs(est.raw_rho1 - 0.3) < 0.06, est
    else:
        assert est.reason == NO_EXPLORATION, est
