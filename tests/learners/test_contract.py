"""Contract suite: every registered learner honours the protocol of ``app/learners/base.py``.

Parametrised over every entry of :data:`app.learners.registry.ALGORITHMS`, so a
new learner is checked as soon as it is registered.  Feedback is simulated
per feedback field by :data:`FEEDBACK` (add a generator there for a new
field) and refused values per field by :data:`INVALID_FEEDBACK`.  Decisions go
through :func:`_decide`, which gives the learners of the ``rank`` task the
candidate actions they rank (a fixed function of the context, so that twins
decide alike).
"""

from __future__ import annotations

import inspect
import json
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.learners import registry
from app.learners.base import Decision, Learner, ParamError, stack_events

N_FEATURES = 5
N_CLASSES = 4
N_EVENTS = 60

FeedbackGenerator = Callable[[Learner, Decision, np.random.Generator], Any]


def _click(learner: Learner, decision: Decision, rng: np.random.Generator) -> float:
    return float(rng.integers(2))


def _label(learner: Learner, decision: Decision, rng: np.random.Generator) -> int:
    return int(rng.integers(learner.n_classes))  # type: ignore[attr-defined]


def _gold(learner: Learner, decision: Decision, rng: np.random.Generator) -> int:
    return int(rng.integers(2))


def _target(learner: Learner, decision: Decision, rng: np.random.Generator) -> float:
    if getattr(learner, "classification", False):
        return float(rng.choice([-1.0, 1.0]))
    return float(rng.standard_normal())


def _copies(learner: Learner, decision: Decision, rng: np.random.Generator) -> np.ndarray:
    """Noisy copies of the logged input, padded to a fixed count so that events stack."""
    x = np.asarray(decision.context["x"])
    k = max(learner.copies_needed(decision.context), 64)  # type: ignore[attr-defined]
    return x + 0.1 * rng.standard_normal((k, x.shape[0]))


def _values(learner: Learner, decision: Decision, rng: np.random.Generator) -> np.ndarray:
    """1 to 3 noisy labels, NaN-padded to 3 so that events stack (regression task)."""
    values = np.full(3, np.nan)
    k = int(rng.integers(1, 4))
    values[:k] = rng.standard_normal() + 0.5 * rng.standard_normal(k)
    return values


def _variance(learner: Learner, decision: Decision, rng: np.random.Generator) -> float:
    """Known label-noise variance, or NaN (unknown) half of the time."""
    return float(rng.uniform(0.0, 2.0)) if rng.random() < 0.5 else float("nan")


def _clicks(learner: Learner, decision: Decision, rng: np.random.Generator) -> np.ndarray:
    """One click per slot of a ranking (rank task)."""
    return rng.integers(0, 2, np.asarray(decision.context["scores"]).shape[0]).astype(float)


def _reward(learner: Learner, decision: Decision, rng: np.random.Generator) -> float:
    return float(rng.standard_normal())


def _click_value(learner: Learner, decision: Decision, rng: np.random.Generator) -> float:
    """What a click was worth, or NaN (a plain reward) half of the time (continuous task)."""
    return float(rng.uniform(0.5, 2.0)) if rng.random() < 0.5 else float("nan")


#: Feedback field name -> generator of a valid random value for one decision.
FEEDBACK: dict[str, FeedbackGenerator] = {
    "click": _click,
    "label": _label,
    "gold": _gold,
    "true_label": _label,
    "target": _target,
    "copies": _copies,
    "values": _values,
    "variance": _variance,
    "clicks": _clicks,
    "reward": _reward,
    "click_value": _click_value,
}

#: Feedback field name -> a value the learner must refuse with a ValueError.
INVALID_FEEDBACK: dict[str, Any] = {
    "click": 1.5,
    "label": N_CLASSES + 3,
    "true_label": -1,
    "target": float("nan"),
    "copies": np.zeros((1, N_FEATURES + 1)),
    "values": np.array([1.0, np.inf]),
    "variance": -1.0,
    "clicks": np.full(3, 1.5),
    "reward": float("nan"),
    "click_value": float("inf"),
}

CASES = sorted(registry.ALGORITHMS)


def _classes(task: str, algorithm: str) -> int | None:
    """``N_CLASSES`` for a learner built with ``n_classes``, else None."""
    return N_CLASSES if registry.takes_classes(registry.learner_class(task, algorithm)) else None


def _build(task: str, algorithm: str, seed: int | None = 0, **params: Any) -> Learner:
    n_classes = _classes(task, algorithm)
    return registry.build(task, algorithm, N_FEATURES, n_classes, params, seed=seed)


def _inputs(n: int, seed: int = 1) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, N_FEATURES))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


#: Candidates a rank learner gets per decision.
N_CANDIDATES = 6


def _candidates(learner: Learner, x: np.ndarray) -> np.ndarray:
    """Candidate action features for context ``x``: the same for the same ``x``."""
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(x).tobytes()))
    return rng.standard_normal((N_CANDIDATES, learner.n_action_features))  # type: ignore[attr-defined]


def _decide(learner: Learner, x: np.ndarray, explore: bool = True) -> Decision:
    """``learner.decide(x)``, with candidate actions for the rank task."""
    if learner.task == "rank":
        return learner.decide(x, explore, actions=_candidates(learner, x))  # type: ignore[call-arg]
    return learner.decide(x, explore)


def _decide_many(learner: Learner, X: np.ndarray, explore: bool) -> list[Decision]:
    """``learner.decide_many(X)``, with candidate actions per row for the rank task."""
    if learner.task == "rank":
        return learner.decide_many(  # type: ignore[call-arg]
            X, explore, actions=[_candidates(learner, x) for x in X])
    return learner.decide_many(X, explore=explore)


def _require_feedback(learner: Learner) -> None:
    missing = [f for f in learner.feedback_fields if f not in FEEDBACK]
    if missing:
        pytest.skip(f"no feedback generator for {missing}: add one to FEEDBACK in {__file__}")


def _event(learner: Learner, decision: Decision, rng: np.random.Generator) -> dict[str, Any]:
    fb = {f: FEEDBACK[f](learner, decision, rng) for f in learner.feedback_fields}
    return {**decision.context, **fb}


def _play(learner: Learner, n: int = N_EVENTS, seed: int = 2) -> list[dict[str, Any]]:
    """Decide and learn sequentially on a stream; return the joined events."""
    _require_feedback(learner)
    rng = np.random.default_rng(seed)
    events = []
    for x in _inputs(n):
        event = _event(learner, _decide(learner, x), rng)
        events.append(event)
        learner.learn_one(event)
    return events


def _assert_state_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                        rtol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        np.testing.assert_allclose(value, b[name], rtol=rtol, atol=0.0, err_msg=name)


@pytest.fixture(params=CASES, ids=[f"{t}-{a}" for t, a in CASES])
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    task, algorithm = request.param
    return task, algorithm


def test_decide_before_learning_gives_logged_context(case: tuple[str, str]) -> None:
    learner = _build(*case)
    x = _inputs(1)[0]
    decision = _decide(learner, x)
    json.dumps(decision.output)
    assert decision.context, "a decision must log its context"
    _require_feedback(learner)
    learner.learn_one(_event(learner, decision, np.random.default_rng(0)))


def test_decide_and_learn_do_not_mutate_or_keep_inputs(case: tuple[str, str]) -> None:
    learner = _build(*case)
    _play(learner, 10)
    x = _inputs(1, seed=9)[0]
    x_before = x.copy()
    decision = _decide(learner, x)
    np.testing.assert_array_equal(x, x_before)
    for name, value in decision.context.items():
        assert not np.shares_memory(np.asarray(value), x), f"context {name!r} aliases the input"
    event = _event(learner, decision, np.random.default_rng(3))
    arrays = {k: np.array(v, copy=True) for k, v in event.items()}
    learner.learn_one(event)
    for k, v in event.items():
        np.testing.assert_array_equal(np.asarray(v), arrays[k], err_msg=k)
    state = learner.get_state()
    for v in event.values():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            v += 1.0  # mutating the event afterwards must not reach the learner
    x += 1.0
    _assert_state_equal(state, learner.get_state())


def test_decide_without_exploration_keeps_state_and_generator(case: tuple[str, str]) -> None:
    learner, twin = _build(*case, seed=5), _build(*case, seed=5)
    _play(learner, 20)
    _play(twin, 20)
    before = learner.get_state()
    for x in _inputs(5, seed=4):
        _decide(learner, x, explore=False)
    _assert_state_equal(before, learner.get_state())
    for x in _inputs(5, seed=6):  # the generator was not advanced either
        assert _decide(learner, x).output == _decide(twin, x).output


def test_state_round_trips(case: tuple[str, str]) -> None:
    learner = _build(*case)
    _play(learner, 30)
    state = learner.get_state()
    assert state and all(name.endswith("_") for name in state)
    for arr in state.values():
        arr[...] = 0  # the export is a copy
    state = learner.get_state()
    fresh = _build(*case, seed=99)
    fresh.set_state(state)
    _assert_state_equal(state, fresh.get_state())
    for x in _inputs(10, seed=7):
        assert _decide(fresh, x, explore=False).output == \
            _decide(learner, x, explore=False).output


def test_set_state_refuses_wrong_shapes_and_missing_arrays(case: tuple[str, str]) -> None:
    learner = _build(*case)
    state = learner.get_state()
    name = next(iter(state))
    with pytest.raises(ParamError, match=name):
        learner.set_state({**state, name: np.zeros(np.asarray(state[name]).size + 1)})
    with pytest.raises(ParamError, match="missing"):
        learner.set_state({k: v for k, v in state.items() if k != name})


def test_same_seed_gives_same_decisions(case: tuple[str, str]) -> None:
    a, b = _build(*case, seed=11), _build(*case, seed=11)
    events_a, events_b = _play(a), _play(b)
    for ea, eb in zip(events_a, events_b, strict=True):
        assert ea.keys() == eb.keys()
        for k in ea:
            np.testing.assert_array_equal(np.asarray(ea[k]), np.asarray(eb[k]), err_msg=k)
    _assert_state_equal(a.get_state(), b.get_state())


@pytest.mark.parametrize("explore", [True, False])
def test_decide_many_equals_decide_in_a_loop(case: tuple[str, str], explore: bool) -> None:
    looped, batched = _build(*case, seed=5), _build(*case, seed=5)
    for learner in (looped, batched):
        _play(learner, 40)  # trained weights, so decisions are not all ties
    X = _inputs(30, seed=4)
    expected = [_decide(looped, x, explore=explore) for x in X]
    got = _decide_many(batched, X, explore=explore)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.output == e.output
        assert g.context.keys() == e.context.keys()
        for k in e.context:
            np.testing.assert_array_equal(np.asarray(g.context[k]), np.asarray(e.context[k]),
                                          err_msg=k)
    # the generators are in the same place afterwards
    assert _decide(looped, X[0]).output == _decide(batched, X[0]).output


@pytest.mark.parametrize("explore", [True, False])
def test_decide_contexts_equals_decide_many_stacked(case: tuple[str, str],
                                                   explore: bool) -> None:
    if _build(*case).task == "rank":
        pytest.skip("rank learners decide with candidates; they follow logged plays as logged")
    looped, columns = _build(*case, seed=5), _build(*case, seed=5)
    for learner in (looped, columns):
        _play(learner, 40)  # trained weights, so decisions are not all ties
    X = _inputs(30, seed=4)
    expected = stack_events([d.context for d in looped.decide_many(X, explore=explore)])
    got = columns.decide_contexts(X, explore=explore)
    assert got.keys() == expected.keys()
    for k, value in expected.items():
        assert got[k].dtype == value.dtype, k
        np.testing.assert_array_equal(got[k], value, err_msg=k)
    # the generators are in the same place afterwards
    assert _decide(looped, X[0]).output == _decide(columns, X[0]).output


def test_learn_many_equals_learn_one(case: tuple[str, str]) -> None:
    sequential = _build(*case, seed=3)
    events = _play(sequential, 80)
    batched = _build(*case, seed=3)
    batched.learn_many(stack_events(events))
    seq, bat = sequential.get_state(), batched.get_state()
    assert seq.keys() == bat.keys()
    for name, value in seq.items():
        scale = max(float(np.max(np.abs(value), initial=0.0)), 1.0)
        np.testing.assert_allclose(bat[name], value, rtol=1e-9, atol=1e-9 * scale, err_msg=name)


def test_learn_many_empty_batch_is_a_no_op(case: tuple[str, str]) -> None:
    learner = _build(*case)
    before = learner.get_state()
    learner.learn_many({})
    _assert_state_equal(before, learner.get_state())


def test_state_size_is_bounded(case: tuple[str, str]) -> None:
    learner = _build(*case)
    _play(learner, 10)
    size = sum(np.asarray(v).nbytes for v in learner.get_state().values())
    _play(learner, 100, seed=8)
    assert sum(np.asarray(v).nbytes for v in learner.get_state().values()) == size


def test_decide_refuses_bad_inputs(case: tuple[str, str]) -> None:
    learner = _build(*case)
    with pytest.raises(ValueError, match="features"):
        _decide(learner, np.zeros(N_FEATURES + 1))
    bad = np.zeros(N_FEATURES)
    bad[2] = np.nan
    with pytest.raises(ValueError, match="features"):
        _decide(learner, bad)


def test_learn_refuses_out_of_domain_feedback(case: tuple[str, str]) -> None:
    learner = _build(*case)
    _require_feedback(learner)
    checked = [f for f in learner.feedback_fields if f in INVALID_FEEDBACK]
    if not checked:
        pytest.skip("no invalid value known for these feedback fields")
    decision = _decide(learner, _inputs(1)[0])
    for field in checked:
        event = {**_event(learner, decision, np.random.default_rng(0)),
                 field: INVALID_FEEDBACK[field]}
        with pytest.raises(ValueError):
            learner.learn_one(event)


def test_construction_refuses_invalid_params(case: tuple[str, str]) -> None:
    task, algorithm = case
    with pytest.raises(ParamError, match="n_features"):
        registry.build(task, algorithm, 0, _classes(task, algorithm))
    if _classes(task, algorithm):
        with pytest.raises(ParamError, match="n_classes"):
            registry.build(task, algorithm, N_FEATURES, 1)
    with pytest.raises(ParamError, match=r"params\.no_such_param"):
        _build(*case, no_such_param=1)
    cls = registry.learner_class(task, algorithm)
    for name, default in registry.default_params(cls).items():
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            continue
        bad = float("nan") if isinstance(default, float) else -10**9
        with pytest.raises(ParamError, match=f"params.{name}"):
            _build(*case, **{name: bad})


def test_constructor_hyperparameters_have_immutable_defaults(case: tuple[str, str]) -> None:
    cls = registry.learner_class(*case)
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name in ("self", *registry.STRUCTURAL_ARGS):
            continue
        assert p.kind is not inspect.Parameter.VAR_POSITIONAL, name
        assert isinstance(p.default, (int, float, str, bool, tuple, type(None))), name


def test_hyperparameters_are_kept_under_their_names(case: tuple[str, str]) -> None:
    cls = registry.learner_class(*case)
    learner = _build(*case)
    kept = registry.hyper_params(learner)
    assert kept.keys() == registry.default_params(cls).keys()
    # what a driver asks of a built learner is what the class answers for its params
    assert cls.labels_per_event(kept) == cls.labels_per_event(registry.default_params(cls)) >= 1


def test_service_defaults_are_valid_params(case: tuple[str, str]) -> None:
    task, algorithm = case
    cls = registry.learner_class(task, algorithm)
    assert set(cls.service_defaults) <= set(registry.default_params(cls))
    learner = _build(*case, **cls.service_defaults)
    params = {**registry.default_params(cls), **cls.service_defaults}
    n_classes = _classes(task, algorithm)
    assert cls.state_bytes(N_FEATURES, n_classes, params) == sum(
        np.asarray(v).nbytes for v in learner.get_state().values())


def test_noise_capabilities_are_consistent(case: tuple[str, str]) -> None:
    cls = registry.learner_class(*case)
    params = {**registry.default_params(cls), **cls.service_defaults}
    learner = _build(*case)
    if cls.uses_noise_rates:
        learner.set_noise_rates(0.1, 0.2)
        learner.set_noise_reliability(False)
        assert learner.noise_rates_reliable is False
        learner.set_noise_reliability(True)
        assert learner.noise_rates_reliable is True
    else:
        assert not cls.takes_noise_rates(params)
        with pytest.raises(NotImplementedError):
            learner.set_noise_rates(0.1, 0.2)
        with pytest.raises(NotImplementedError):
            learner.set_noise_reliability(False)
    if cls.owns_noise_estimate:
        assert cls.keeps_noise_samples
    if cls.one_right_label:
        # a statement about the world that the label anchor estimate rests on
        assert cls.uses_noise_rates and cls.task == "label" and not cls.logs_placements
    samples = cls.noise_samples(params)
    if samples is not None:
        assert cls.keeps_noise_samples and samples >= 1
    if cls.keeps_noise_samples:
        # NREst refits on the logged (x, played label, click) with the model's rates
        assert cls.takes_noise_rates(params) and "click" in cls.feedback_fields
        context = _decide(learner, _inputs(1)[0]).context
        assert {"x", "played"} <= set(context)
        assert np.asarray(context["played"]).dtype.kind in "iu"


def test_confusion_capability_is_consistent(case: tuple[str, str]) -> None:
    cls = registry.learner_class(*case)
    learner = _build(*case)
    if not cls.takes_confusion_matrix:
        with pytest.raises(NotImplementedError):
            learner.confusion_report()
        with pytest.raises(NotImplementedError):
            learner.set_confusion(None)
        return
    k = learner.n_classes  # type: ignore[attr-defined]
    report = learner.confusion_report()
    assert not report.configured and report.n_gold == 0
    matrix = np.full((k, k), 0.1 / (k - 1)) + (0.9 - 0.1 / (k - 1)) * np.eye(k)
    learner.set_confusion(matrix)
    report = learner.confusion_report()
    assert report.configured and report.ready and report.message is None
    np.testing.assert_allclose(report.matrix, matrix)
    learner.set_confusion(None)
    assert not learner.confusion_report().configured


def test_followed_decision_plays_the_baseline_and_is_learned(case: tuple[str, str]) -> None:
    """A learner that declares ``follows_baseline`` serves the caller's choice with
    probability 1, keeps its own greedy choice, and learns from the followed event."""
    learner = _build(*case, seed=5)
    if not learner.follows_baseline:
        pytest.skip("does not follow a baseline")
    _play(learner, 10)
    x = _inputs(1, seed=8)[0]
    greedy = _decide(learner, x, explore=False)
    if learner.task == "rank":
        actions = _candidates(learner, x)
        rows = list(range(N_CANDIDATES))[::-1]
        followed = learner.follow_ranking(x, rows, actions=actions)  # type: ignore[attr-defined]
        assert [r["index"] for r in followed.output["ranking"]] == rows[:len(
            followed.output["ranking"])]
        assert {r["probability"] for r in followed.output["ranking"]} == {1.0}
        assert followed.output["greedy"] == greedy.output["greedy"]
        with pytest.raises(ParamError):
            learner.follow_ranking(x, [0, 0, 1], actions=actions)  # type: ignore[attr-defined]
    else:
        baseline = (int(greedy.output["greedy_label"]) + 1) % N_CLASSES
        followed = learner.follow(greedy, baseline)
        assert (followed.output["label"], followed.output["probability"]) == (baseline, 1.0)
        assert followed.output["greedy_label"] == greedy.output["greedy_label"]
        assert learner.follow(greedy, int(greedy.output["greedy_label"])) is greedy
    learner.learn_one(_event(learner, followed, np.random.default_rng(1)))
    assert all(np.isfinite(v).all() for v in learner.get_state().values()
               if v.dtype.kind == "f")
