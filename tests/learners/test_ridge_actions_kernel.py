"""``ridge_ucb``'s compiled passes equal its numpy path (:mod:`app.learners.ridge_actions_kernel`).

hypothesis draws a learner's shape and hyper-parameters (inputs, Legendre degree, grid,
forgetting, ridge, noise rates) and a stream of events (clicks and plain rewards, actions at
the range's ends among them), learned before and in the batch.  The compiled and the numpy
learner, built with the same seed, must hold the same state and make the same decisions.

Tolerance of the state: every entry of ``gram_``, ``gram_sq_`` and ``sum_rphi_`` is a sum of
at most 40 products (one event's products are the same in both; the batch's sum runs in
another order, and forgetting ages by ``gamma`` per event where numpy takes ``gamma^n``
once), so the two differ by at most ``40 * 2 * 2.2e-16 = 1.8e-14`` of the array's scale;
``1e-12`` leaves a margin of 50.  Decisions: the same grid actions (a tie between grid
actions would need two scores equal to rounding), and the played action and its density
from them by the same formula, to ``1e-12``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.learners import jit, registry
from app.learners.base import ParamError, stack_events
from app.learners.ridge_actions import RidgeUCB
from tests.learners.test_compiled import PROPERTY, needs_numba

#: Relative tolerance of compiled against numpy (module docstring).
RTOL = 1e-12
LO, HI = -1.0, 3.0

pytestmark = needs_numba


@st.composite
def streams(draw: st.DrawFn) -> dict[str, Any]:
    """A learner's parameters and a stream of events: (before, batch, contexts to decide)."""
    d = draw(st.integers(1, 4))
    n_before, n = draw(st.integers(0, 20)), draw(st.integers(1, 20))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    total = n_before + n
    X = rng.uniform(-2.0, 2.0, (total, d))
    action = rng.uniform(LO, HI, total)
    action[rng.random(total) < 0.1] = LO
    action[rng.random(total) < 0.1] = HI
    value = np.where(rng.random(total) < 0.5, np.nan, rng.uniform(0.5, 3.0, total))
    reward = np.where(np.isnan(value), rng.normal(0.0, 2.0, total),
                      value * (rng.random(total) < 0.4))
    events = [{"x": X[i], "action": np.float64(action[i]),
               "pdf": np.float64(rng.uniform(0.05, 2.0)), "greedy": np.float64(action[i]),
               "reward": np.float64(reward[i]), "click_value": np.float64(value[i])}
              for i in range(total)]
    rho0 = draw(st.sampled_from([0.0, 0.05]))
    params = {"action_range": [LO, HI], "degree": draw(st.integers(1, 5)),
              "grid": draw(st.sampled_from([2, 17, 64])),
              "alpha": draw(st.sampled_from([0.0, 1.0, 3.0])),
              "half_life": draw(st.sampled_from([None, 1.0, 3.5, 50.0])),
              "ridge": draw(st.sampled_from([0.5, 1.0, 20.0])),
              "rho0": rho0, "rho1": draw(st.sampled_from([0.0, 0.3]))}
    return {"d": d, "params": params, "before": events[:n_before], "batch": events[n_before:],
            "decide": rng.uniform(-2.0, 2.0, (draw(st.integers(1, 5)), d))}


def _learned(case: dict[str, Any], compiled: bool, monkeypatch: pytest.MonkeyPatch,
             one_by_one: bool) -> RidgeUCB:
    learner = registry.build("continuous", "ridge_ucb", case["d"], None, case["params"], seed=0)
    assert isinstance(learner, RidgeUCB)
    with monkeypatch.context() as patch:
        patch.setattr(jit, "ENABLED", compiled)
        for event in case["before"]:
            learner.learn_one(event)
        if one_by_one:
            for event in case["batch"]:
                learner.learn_one(event)
        else:
            learner.learn_many(stack_events(case["batch"]))
    return learner


def _assert_close(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert expected.keys() == got.keys()
    for name, value in expected.items():
        scale = max(float(np.max(np.abs(value), initial=0.0)), 1e-300)
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=RTOL * scale, err_msg=name)


@PROPERTY
@given(case=streams(), one_by_one=st.booleans())
def test_compiled_learning_equals_the_numpy_path(case: dict[str, Any], one_by_one: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    numpy_path = _learned(case, False, monkeypatch, one_by_one=False)
    compiled = _learned(case, True, monkeypatch, one_by_one)
    _assert_close(numpy_path.get_state(), compiled.get_state())


@PROPERTY
@given(case=streams(), explore=st.booleans())
def test_compiled_decisions_equal_the_numpy_path(case: dict[str, Any], explore: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    numpy_path = _learned(case, False, monkeypatch, one_by_one=False)
    compiled = _learned(case, True, monkeypatch, one_by_one=False)
    with monkeypatch.context() as patch:
        patch.setattr(jit, "ENABLED", False)
        expected = numpy_path.decide_contexts(case["decide"], explore)
    got = compiled.decide_contexts(case["decide"], explore)
    np.testing.assert_array_equal(got["greedy"], expected["greedy"])
    np.testing.assert_array_equal(got["x"], expected["x"])
    for name in ("action", "pdf"):
        np.testing.assert_allclose(got[name], expected[name], rtol=RTOL, err_msg=name)


@pytest.mark.parametrize(("field", "value"), [("x", np.nan), ("action", HI + 1.0),
                                              ("pdf", 0.0), ("reward", np.inf),
                                              ("click_value", -np.inf)])
def test_compiled_learning_refuses_what_the_numpy_path_refuses(field: str, value: float
                                                               ) -> None:
    learner = RidgeUCB(2, action_range=(LO, HI), seed=0)
    before = learner.get_state()
    event = {"x": np.ones(2), "action": np.float64(1.0), "pdf": np.float64(0.5),
             "reward": np.float64(1.0), "click_value": np.float64(np.nan)}
    event[field] = np.full(2, value) if field == "x" else np.float64(value)
    with pytest.raises(ParamError) as refused:
        learner.learn_one(event)
    assert refused.value.field == field
    for name, array in learner.get_state().items():
        np.testing.assert_array_equal(array, before[name])


def test_compiled_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch decides the path: on, the kernels run; off, they do not."""
    import app.learners.ridge_actions as ridge_actions

    calls: list[str] = []
    for name in ("ucb_decide", "ucb_learn", "ucb_solve"):
        kernel = getattr(ridge_actions, name)
        monkeypatch.setattr(ridge_actions, name,
                            lambda *args, _k=kernel, _n=name: calls.append(_n) or _k(*args))
    learner = RidgeUCB(1, seed=0)
    decided = learner.decide_contexts(np.ones((1, 1)))
    learner.learn_many({**decided, "reward": np.ones(1), "click_value": np.full(1, np.nan)})
    assert calls == ["ucb_solve", "ucb_decide", "ucb_learn"]
    monkeypatch.setattr(jit, "ENABLED", False)
    decided = learner.decide_contexts(np.ones((1, 1)))
    learner.learn_many({**decided, "reward": np.ones(1), "click_value": np.full(1, np.nan)})
    assert len(calls) == 3
