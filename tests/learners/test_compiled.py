"""The compiled kernels equal the learners' sequential definition, and so do the numpy paths.

Each learner with a compiled ``learn_many`` (:mod:`app.learners.jit`) is run
three ways on the same events: ``learn_one`` event by event (the definition),
``learn_many`` through the kernel, and ``learn_many`` with the switch off (the
pure-numpy path).  hypothesis draws the batches: shapes, scales, ties of arms,
forgetting on and off, a state learned before the batch.

Tolerance: the kernel sums over features left to right where numpy pairs the
terms, and its powers may differ from numpy's in the last bit.  Each step's
results are then within a few ``d eps`` of the definition's, relative to the
sizes of the terms, and a step passes an earlier difference on without
amplifying it (the gain's denominator is at least ``1``).  Over at most 60
events of at most 8 features that is below ``60 * 8 * 2.2e-16 = 1.1e-13`` of
each array's scale; ``1e-12`` leaves a margin of 9.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.learners import jit, registry
from app.learners.base import Learner, stack_events

#: Relative tolerance of compiled against sequential (module docstring).
RTOL = 1e-12

#: Learners whose ``learn_many`` has a compiled kernel: (task, algorithm).
COMPILED = [("label", "linucb_diag"), ("label", "squarecb_diag"), ("label", "lints_diag"),
            ("label", "bpa")]

#: The drawn hyper-parameters each learner takes (the rest keep their defaults).
TAKES = {"linucb_diag": ("half_life", "ridge"), "squarecb_diag": ("half_life", "ridge"),
         "lints_diag": ("half_life", "ridge"), "bpa": ()}

#: Learners whose clicks are exactly 0 or 1.
BINARY_CLICKS = {"bpa"}

#: hypothesis settings of the property tests (the monkeypatch fixture is reset by hand).
PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

needs_numba = pytest.mark.skipif(not jit.ENABLED, reason="numba is not installed or is off")


@st.composite
def streams(draw: st.DrawFn) -> dict[str, Any]:
    """A learner's shape and hyper-parameters and a stream of events (before, batch)."""
    d = draw(st.integers(1, 8))
    k = draw(st.integers(2, 5))
    n_before = draw(st.integers(0, 20))
    n = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = 10.0 ** draw(st.integers(-3, 3))
    X = scale * rng.standard_normal((n_before + n, d))
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.3]))] = 0.0
    arms = draw(st.integers(1, k))  # few arms: many events of one arm in a batch
    played = rng.integers(0, arms, n_before + n)
    click = rng.integers(0, 2, n_before + n).astype(float)
    if draw(st.booleans()):
        click = rng.random(n_before + n)
    half_life = draw(st.sampled_from([None, 1.0, 3.5, 50.0, 700.0]))
    ridge = draw(st.sampled_from([0.5, 1e-3, 20.0]))
    events = [{"x": X[i], "played": np.int64(played[i]), "click": click[i]}
              for i in range(n_before + n)]
    return {"d": d, "k": k, "params": {"half_life": half_life, "ridge": ridge},
            "before": events[:n_before], "batch": events[n_before:]}


def _build(task: str, algorithm: str, case: dict[str, Any]) -> Learner:
    params = {name: case["params"][name] for name in TAKES[algorithm]}
    return registry.build(task, algorithm, case["d"], case["k"], params, seed=0)


def _events(algorithm: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with clicks rounded to 0 or 1 for the learners that take only those."""
    if algorithm not in BINARY_CLICKS:
        return events
    return [{**e, "click": float(round(e["click"]))} for e in events]


def _assert_close(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert expected.keys() == got.keys()
    for name, value in expected.items():
        scale = max(float(np.max(np.abs(value), initial=0.0)), 1e-300)
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=RTOL * scale, err_msg=name)


@pytest.mark.parametrize("compiled", [pytest.param(True, marks=needs_numba, id="compiled"),
                                      pytest.param(False, id="numpy")])
@pytest.mark.parametrize(("task", "algorithm"), COMPILED)
@PROPERTY
@given(case=streams())
def test_learn_many_equals_learn_one(task: str, algorithm: str, compiled: bool,
                                     case: dict[str, Any],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``learn_many`` through the kernel (or the numpy path) equals ``learn_one`` in a loop."""
    sequential = _build(task, algorithm, case)
    batched = _build(task, algorithm, case)
    for event in _events(algorithm, case["before"]):
        sequential.learn_one(event)
        batched.learn_one(event)
    batch = _events(algorithm, case["batch"])
    for event in batch:
        sequential.learn_one(event)
    with monkeypatch.context() as patch:
        patch.setattr(jit, "ENABLED", compiled)
        batched.learn_many(stack_events(batch))
    _assert_close(sequential.get_state(), batched.get_state())


@needs_numba
def test_compiled_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch decides the path: on, ``learn_many`` calls the kernel; off, it does not."""
    import app.learners.ridge as ridge

    calls: list[int] = []
    kernel = ridge.diag_ridge_pass

    def counted(*args: Any) -> Any:
        calls.append(1)
        return kernel(*args)

    monkeypatch.setattr(ridge, "diag_ridge_pass", counted)
    learner = registry.build("label", "linucb_diag", 3, 2, {}, seed=0)
    batch = stack_events([{"x": np.ones(3), "played": np.int64(1), "click": 1.0}])
    learner.learn_many(batch)
    assert calls == [1]
    monkeypatch.setattr(jit, "ENABLED", False)
    learner.learn_many(batch)
    assert calls == [1]


@needs_numba
def test_warm_loads_every_kernel() -> None:
    """``warm`` (a worker's start) leaves every kernel compiled, so no batch waits for it."""
    jit.warm()
    assert jit._KERNELS
    assert all(kernel._compiled is not None for kernel in jit._KERNELS)


@needs_numba
def test_kernel_without_a_cache_location_compiles_in_memory(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A read-only install with no writable cache directory still learns (numba refuses
    ``cache=True`` there with a RuntimeError)."""
    import numba

    njit = numba.njit

    def no_cache(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available for file")
        return njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache)

    def double(x: np.ndarray) -> np.ndarray:
        return 2.0 * x

    kernel = jit._Kernel(double, lambda: (np.ones(1),))
    np.testing.assert_array_equal(kernel(np.arange(3.0)), [0.0, 2.0, 4.0])
    assert "compiles without a cache" in caplog.text
