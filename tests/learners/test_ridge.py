"""Numeric tests of the diagonal ridge bandits (app/learners/ridge.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import chi2

from app.learners.base import ParamError, stack_events
from app.learners.registry import build
from app.learners.ridge import DiagRidge, LinUCBDiag, SquareCBDiag, igw_probabilities
from app.sim.feedback import noisy_clicks

DIAG = [LinUCBDiag, SquareCBDiag]


def _events(model: DiagRidge, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` joined events decided by a fresh copy of ``model``'s class on random inputs."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.normal(size=model.n_features) * rng.integers(0, 2, size=model.n_features)
        d = model.decide(x)
        out.append({**d.context, "click": float(rng.random() < 0.4)})
    return out


@pytest.mark.parametrize("cls", DIAG)
def test_learn_many_equals_sequential(cls: type[DiagRidge]) -> None:
    seq = cls(n_features=6, n_classes=4, seed=3)
    events = _events(cls(n_features=6, n_classes=4, seed=3), 400, seed=1)
    for e in events:
        seq.learn_one(e)
    bat = cls(n_features=6, n_classes=4, seed=3)
    for start in (0, 1, 150):  # a one-event batch, then two larger ones
        stop = {0: 1, 1: 150, 150: 400}[start]
        bat.learn_many(stack_events(events[start:stop]))
    for name, value in seq.get_state().items():
        np.testing.assert_allclose(bat.get_state()[name], value, rtol=1e-12, atol=1e-14,
                                   err_msg=name)


@pytest.mark.parametrize("cls", DIAG)
def test_set_state_round_trips(cls: type[DiagRidge]) -> None:
    model = cls(n_features=5, n_classes=3, seed=0)
    for e in _events(model, 200, seed=2):
        model.learn_one(e)
    copy = cls(n_features=5, n_classes=3, seed=0)
    copy.set_state(model.get_state())
    for name, value in model.get_state().items():
        np.testing.assert_array_equal(copy.get_state()[name], value)
    x = np.linspace(-1.0, 1.0, 5)
    assert copy.decide(x, explore=False).output == model.decide(x, explore=False).output


def test_set_state_refuses_wrong_shapes() -> None:
    model = LinUCBDiag(n_features=5, n_classes=3)
    state = model.get_state()
    state["weights_"] = np.zeros((3, 4))
    with pytest.raises(ParamError, match="weights_"):
        model.set_state(state)


@pytest.mark.slow
@pytest.mark.parametrize("cls", DIAG)
def test_calibrated_reward_unbiased_under_click_noise(cls: type[DiagRidge]) -> None:
    # Constant input: each arm's model is the ridge mean of its observed clicks,
    # sum(click) / (n + lambda), whose expectation is rho0 + beta * p (without forgetting:
    # the standard error below is that of all n clicks).
    rho0, rho1, n = 0.2, 0.4, 40_000
    beta = 1.0 - rho0 - rho1
    true_rate = np.array([0.1, 0.9])
    rng = np.random.default_rng(7)
    played = np.repeat([0, 1], n)
    clicks = noisy_clicks((rng.random(2 * n) < true_rate[played]).astype(float), rho0, rho1, rng)
    model = cls(n_features=1, n_classes=2, seed=0, half_life=None)
    model.learn_many({"x": np.ones((2 * n, 1)), "played": played, "click": clicks,
                      "greedy": played, "prob": np.ones(2 * n)})
    model.set_noise_rates(rho0, rho1)
    mean, _ = model._estimate(np.ones(1))
    observed = rho0 + beta * true_rate
    se = np.sqrt(observed * (1.0 - observed) / n) / beta  # SE of the calibrated estimate
    estimate = np.array([model.calibrate(float(m)) for m in mean])
    assert np.all(np.abs(estimate - true_rate) < 4 * se), (estimate, se)
    # ... and decisions report it for the played (here greedy) label, corrected by its
    # recent mean residual: noise here (no bias to correct), shrunk to nearly nothing
    offset = model.reward_offset(1)
    reported = model.decide(np.ones(1), explore=False).output["expected_reward"]
    assert reported == model.calibrate(float(mean[1]) + offset)
    assert abs(reported - true_rate[1]) < 4 * se[1], (reported, offset, se)


@pytest.mark.slow
def test_expected_reward_is_the_played_arms_click_rate_without_forgetting() -> None:
    """An argmax world a linear model without intercept fits badly (10 arms, 20 features,
    rates (0.15, 0.25)), learned in batches of 500 as a service does: over the last 10,000
    events the mean ``expected_reward`` of the played arms is their rate of right plays
    within three standard errors of that rate (0.014) plus 0.02, the lag of a batch's
    decisions behind the residuals its learning sees (it was 0.020 low; reported from the
    means alone, 0.14 low)."""
    rho0, rho1, k, d = 0.15, 0.25, 10, 20
    rng = np.random.default_rng(3)
    W = rng.standard_normal((k, d))
    model = LinUCBDiag(n_features=d, n_classes=k, seed=3, half_life=None, rho0=rho0, rho1=rho1)
    reported, right = [], []
    for batch in range(30):
        X = rng.standard_normal((500, d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        decisions = model.decide_many(X)
        played = np.array([dec.output["label"] for dec in decisions])
        hits = (played == np.argmax(X @ W.T, axis=1)).astype(float)
        model.learn_many({"x": X, "played": played,
                          "click": noisy_clicks(hits, rho0, rho1, rng)})
        if batch >= 10:
            reported += [dec.output["expected_reward"] for dec in decisions]
            right += hits.tolist()
    hit = float(np.mean(right))
    assert abs(np.mean(reported) - hit) <= 3 * np.sqrt(hit * (1 - hit) / len(right)) + 0.02, (
        np.mean(reported), hit)


def test_set_noise_rates_refuses_invalid_rates() -> None:
    model = SquareCBDiag(n_features=2, n_classes=2)
    with pytest.raises(ParamError, match="rho1"):
        model.set_noise_rates(0.6, 0.4)


@pytest.mark.parametrize("gamma", [0.0, 1.0, 37.5, 1e6])
def test_igw_probabilities_sum_to_one(gamma: float) -> None:
    mean = np.random.default_rng(0).normal(size=7)
    p = igw_probabilities(mean, gamma)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(p > 0.0)
    assert p[np.argmax(mean)] >= 1.0 / 7 - 1e-12


def test_squarecb_logs_the_propensity_it_draws_with() -> None:
    model = SquareCBDiag(n_features=2, n_classes=4, seed=11)
    state = model.get_state()
    state["weights_"] = np.array([[1.0, 0.0], [0.5, 0.0], [0.2, 0.0], [0.0, 0.0]])
    model.set_state(state)
    x = np.array([1.0, 0.0])
    p = model.probabilities(x)  # gamma = 10: 1/(4 + 10 gap)
    np.testing.assert_allclose(p[1:], [1 / 9, 1 / 12, 1 / 14])
    n = 20_000
    counts = np.zeros(4)
    for _ in range(n):
        d = model.decide(x)
        label = d.output["label"]
        assert d.output["probability"] == float(d.context["prob"]) == p[label]
        counts[label] += 1
    stat = float(np.sum((counts - n * p) ** 2 / (n * p)))
    assert stat < chi2.ppf(0.999, df=3), (counts / n, p)


def test_squarecb_without_explore_plays_greedy() -> None:
    model = SquareCBDiag(n_features=2, n_classes=3, seed=0)
    state = model.get_state()
    state["weights_"] = np.array([[0.0, 0.0], [0.3, 0.0], [0.1, 0.0]])
    model.set_state(state)
    out = model.decide(np.array([1.0, 0.0]), explore=False).output
    assert (out["label"], out["greedy_label"], out["probability"]) == (1, 1, 1.0)


def test_linucb_diag_plays_upper_confidence_label() -> None:
    model = LinUCBDiag(n_features=2, n_classes=2, alpha=1.0, uniform_share=0.0)
    # Arm 0 seen often with mean 0.5, arm 1 never: its width wins.
    model.learn_many({"x": np.tile([1.0, 0.0], (100, 1)), "played": np.zeros(100, dtype=int),
                      "click": np.tile([0.0, 1.0], 50), "greedy": np.zeros(100, dtype=int),
                      "prob": np.ones(100)})
    d = model.decide(np.array([1.0, 0.0]))
    assert (d.output["greedy_label"], d.output["label"], d.output["probability"]) == (0, 1, 1.0)
    assert model.decide(np.array([1.0, 0.0]), explore=False).output["label"] == 0


def test_ridge_strength_follows_mean_squared_norm() -> None:
    model = LinUCBDiag(n_features=2, n_classes=2, ridge=0.5)
    assert model.ridge_strength() == 0.5
    model.learn_one({"x": np.array([3.0, 4.0]), "played": 0, "click": 1.0})
    model.learn_one({"x": np.array([1.0, 0.0]), "played": 1, "click": 0.0})
    assert model.ridge_strength() == pytest.approx(0.5 * (25.0 + 1.0) / 2)


@pytest.mark.parametrize("cls", DIAG)
def test_learn_reduces_played_error_under_click_noise(cls: type[DiagRidge]) -> None:
    # Three well-separated prototypes; clicks flipped at rho (0.2, 0.4).
    rng = np.random.default_rng(5)
    protos = np.eye(3, 12) * 2.0 + 0.3
    model = cls(n_features=12, n_classes=3, seed=1)
    errors = []
    for _ in range(3000):
        y = int(rng.integers(3))
        d = model.decide(protos[y] + rng.normal(scale=0.3, size=12))
        f = float(d.output["label"] == y)
        errors.append(1.0 - f)
        click = float(noisy_clicks(np.array(f), 0.2, 0.4, rng))
        model.learn_one({**d.context, "click": click})
    assert np.mean(errors[-1000:]) < 0.15


@pytest.mark.parametrize("algorithm", ["linucb_diag", "linucb"])
def test_ucb_uniform_share_draws_uniformly_with_logged_propensity(algorithm: str) -> None:
    """A 0.2 share over 4 labels: the UCB label has 0.85, each other 0.05, drawn so."""
    model = build("label", algorithm, n_features=2, n_classes=4, seed=3,
                  params={"uniform_share": 0.2})
    x = np.array([1.0, 0.0])
    top = model.decide(x, explore=False).output["label"]
    counts = np.zeros(4)
    for _ in range(4000):
        d = model.decide(x)
        label = d.output["label"]
        counts[label] += 1
        assert d.output["probability"] == float(d.context["prob"])
        assert d.output["probability"] == pytest.approx(0.85 if label == top else 0.05)
    expected = np.where(np.arange(4) == top, 0.85, 0.05) * 4000
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected))  # 4 standard errors


@pytest.mark.parametrize("params", [
    {"ridge": 0.0}, {"ridge": float("inf")}, {"alpha": -0.1}, {"rho0": 0.5, "rho1": 0.5},
    {"rho0": -0.1}, {"n_classes": 1}, {"n_features": 0}, {"uniform_share": 1.0},
    {"uniform_share": -0.01},
])
def test_init_refuses_invalid_params(params: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"n_features": 3, "n_classes": 2, **params}
    with pytest.raises(ParamError):
        LinUCBDiag(**kwargs)


@pytest.mark.parametrize("gamma_scale", [-1.0, float("nan")])
def test_squarecb_refuses_invalid_gamma_scale(gamma_scale: float) -> None:
    with pytest.raises(ParamError, match="gamma_scale"):
        SquareCBDiag(n_features=3, n_classes=2, gamma_scale=gamma_scale)


@pytest.mark.parametrize("bad", [{"played": 2}, {"played": -1}, {"click": 1.5},
                                 {"click": float("nan")}, {"x": np.ones(4)}])
def test_learn_one_refuses_invalid_events(bad: dict[str, Any]) -> None:
    model = LinUCBDiag(n_features=3, n_classes=2)
    event: dict[str, Any] = {"x": np.ones(3), "played": 0, "click": 1.0, **bad}
    with pytest.raises(ParamError):
        model.learn_one(event)
    with pytest.raises(ParamError):
        model.learn_many(stack_events([event]))


@pytest.mark.parametrize("cls", DIAG)
def test_expected_reward_is_clipped_and_flagged_when_beta_is_small(cls: type[DiagRidge]) -> None:
    # clicks on every event: the observed rate tends to 1, calibrated (1 - 0.45) / 0.15 > 1
    model = cls(n_features=1, n_classes=2, seed=0, rho0=0.45, rho1=0.4)
    n = 200
    model.learn_many({"x": np.ones((n, 1)), "played": np.zeros(n, dtype=np.int64),
                      "click": np.ones(n), "greedy": np.zeros(n, dtype=np.int64),
                      "prob": np.ones(n)})
    out = model.decide(np.ones(1), explore=False).output
    assert out["label"] == 0 and out["expected_reward"] == 1.0
    assert out["calibration_unreliable"] is True
    model.set_noise_rates(0.1, 0.1)
    assert model.decide(np.ones(1), explore=False).output["calibration_unreliable"] is False
    # rates awaiting an estimate are flagged whatever beta is
    model.set_noise_reliability(False)
    out = model.decide(np.ones(1), explore=False).output
    assert out["calibration_unreliable"] is True and out["expected_reward"] == 1.0


@pytest.mark.parametrize("algorithm", ["linucb_diag", "squarecb_diag", "lints_diag"])
def test_ridge_strength_never_underflows_to_zero(algorithm: str) -> None:
    """An input whose squared norm is subnormal (5e-324) once made ``ridge * mean ||x||^2``
    round to 0: the next decision divided by zero (a 500 on predict).  The strength is now at
    least the smallest normal double; decisions and updates stay finite."""
    learner = build("label", algorithm, n_features=4, n_classes=3, params={"ridge": 0.5},
                    seed=0)
    x = np.array([2.2e-162, 0.0, 0.0, 0.0])
    learner.learn_many(stack_events([{"x": x, "played": np.array(0), "click": np.array(1.0),
                                      "prob": np.array(1.0)}]))
    assert learner.ridge_strength() > 0.0  # type: ignore[attr-defined]
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        decision = learner.decide(np.array([0.0, 0.0, 4.5e-162, 0.0]))
        learner.learn_many(stack_events([{**decision.context, "click": np.array(1.0)}]))
    assert all(np.isfinite(arr).all() for arr in learner.get_state().values())


@pytest.mark.parametrize("uniform_share", [0.0, 0.05])
def test_linucb_diag_decide_many_is_the_loop_bit_for_bit(uniform_share: float) -> None:
    """The batched decisions (widths in one product, draws at once) equal the loop's, ties
    of an untrained model included, and leave the generator where the loop leaves it."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 50))
    trained = LinUCBDiag(n_features=50, n_classes=5, seed=0, uniform_share=uniform_share)
    events = [{**trained.decide(x).context, "click": float(x[0] > 0)} for x in X[:300]]
    trained.learn_many(stack_events(events))
    for state in (None, trained.get_state()):
        looped, batched = (LinUCBDiag(n_features=50, n_classes=5, seed=1,
                                      uniform_share=uniform_share) for _ in range(2))
        if state is not None:
            looped.set_state(state)
            batched.set_state(state)
        for explore in (True, False):
            expected = [looped.decide(x, explore) for x in X]
            got = batched.decide_many(X, explore)
            assert [d.output for d in got] == [d.output for d in expected]
        assert looped.decide(X[0]).output == batched.decide(X[0]).output
