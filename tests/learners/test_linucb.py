"""Numeric tests of the full-ridge LinUCB (app/learners/linucb.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.learners.base import ParamError, stack_events
from app.learners.linucb import LinUCB
from app.learners.registry import build


def _events(n: int, d: int, k: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=d), "played": int(rng.integers(k)),
             "click": float(rng.random() < 0.5), "greedy": 0, "prob": 1.0} for _ in range(n)]


def test_coefficients_equal_closed_form_ridge() -> None:
    events = _events(60, d=3, k=2, seed=0)
    model = LinUCB(n_features=3, n_classes=2, ridge=0.5, alpha=1.5, uniform_share=0.0)
    for e in events:
        model.learn_one(e)
    lam = 0.5 * float(events[0]["x"] @ events[0]["x"])
    X = np.array([e["x"] for e in events])
    a = np.array([e["played"] for e in events])
    r = np.array([e["click"] for e in events])
    x = np.array([0.3, -1.0, 0.8])
    ucb = []
    for arm in range(2):
        A = lam * np.eye(3) + X[a == arm].T @ X[a == arm]
        theta = np.linalg.solve(A, X[a == arm].T @ r[a == arm])
        np.testing.assert_allclose(model.coefficients()[arm], theta, rtol=1e-10)
        ucb.append(theta @ x + 1.5 * np.sqrt(x @ np.linalg.solve(A, x)))
    out = model.decide(x).output
    assert out["label"] == int(np.argmax(ucb))
    assert out["probability"] == 1.0


def test_learn_many_equals_sequential() -> None:
    events = _events(300, d=4, k=3, seed=1)
    seq = LinUCB(n_features=4, n_classes=3)
    for e in events:
        seq.learn_one(e)
    bat = LinUCB(n_features=4, n_classes=3)
    bat.learn_many(stack_events(events[:1]))
    bat.learn_many(stack_events(events[1:120]))
    bat.learn_many(stack_events(events[120:]))
    for name, value in seq.get_state().items():
        np.testing.assert_allclose(bat.get_state()[name], value, rtol=1e-9, atol=1e-12,
                                   err_msg=name)


def test_set_state_round_trips() -> None:
    model = LinUCB(n_features=4, n_classes=3, seed=0)
    for e in _events(100, d=4, k=3, seed=2):
        model.learn_one(e)
    copy = LinUCB(n_features=4, n_classes=3, seed=0)
    copy.set_state(model.get_state())
    for name, value in model.get_state().items():
        np.testing.assert_array_equal(copy.get_state()[name], value)
    x = np.array([1.0, -0.5, 0.2, 0.0])
    assert copy.decide(x).output == model.decide(x).output


def test_set_state_refuses_zero_lambda_after_learning() -> None:
    model = LinUCB(n_features=2, n_classes=2)
    model.learn_one({"x": np.ones(2), "played": 0, "click": 1.0})
    state = model.get_state()
    state["lambda_"] = np.zeros(())
    with pytest.raises(ParamError, match="lambda_"):
        model.set_state(state)


def test_decide_before_learning_plays_first_label() -> None:
    out = LinUCB(n_features=2, n_classes=3, uniform_share=0.0).decide(np.array([1.0, 2.0])).output
    assert (out["label"], out["greedy_label"], out["probability"]) == (0, 0, 1.0)


def test_expected_reward_is_calibrated() -> None:
    model = LinUCB(n_features=1, n_classes=2, rho0=0.2, rho1=0.4)
    model.learn_many({"x": np.ones((1000, 1)), "played": np.zeros(1000, dtype=int),
                      "click": np.r_[np.ones(440), np.zeros(560)]})
    mean = model.coefficients()[0, 0]  # 440 / (1000 + 0.5)
    out = model.decide(np.ones(1), explore=False).output
    assert out["expected_reward"] == pytest.approx((mean - 0.2) / 0.4)


def test_init_refuses_large_inputs() -> None:
    with pytest.raises(ParamError, match="max_features"):
        LinUCB(n_features=201, n_classes=2)
    with pytest.raises(ParamError, match=r"params\.n_features|n_features"):
        build("label", "linucb", n_features=500, n_classes=3)
    assert LinUCB(n_features=300, n_classes=2, max_features=300).n_features == 300


@pytest.mark.parametrize("params", [{"ridge": 0.0}, {"alpha": -1.0}, {"max_features": 0},
                                    {"rho0": 0.7, "rho1": 0.3}])
def test_init_refuses_invalid_params(params: dict[str, Any]) -> None:
    with pytest.raises(ParamError):
        LinUCB(n_features=3, n_classes=2, **params)
