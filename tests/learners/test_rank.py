"""The rank learner (ridge_pl): logged propensities, batches, state, position bias, new items."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.learners.base import ParamError, stack_events
from app.learners.rank import (
    RidgeRanker,
    joint_features,
    position_bias_from_bands,
    refresh_step,
)
from app.sim.rank import RankSimulator

DX, DA, SLOTS = 3, 2, 3


def _model(**params: Any) -> RidgeRanker:
    return RidgeRanker(n_features=DX, n_action_features=DA, slots=SLOTS, seed=0, **params)


def _play(model: RidgeRanker, n: int, seed: int = 1, slots: int | None = None
          ) -> list[dict[str, Any]]:
    """Decide and learn ``n`` events one by one on random data; return the joined events."""
    rng = np.random.default_rng(seed)
    events = []
    for t in range(n):
        x, actions = rng.standard_normal(DX), rng.standard_normal((int(rng.integers(1, 8)), DA))
        decision = model.decide(x, actions=actions, slots=slots if t % 2 else None)
        event = {**decision.context, "clicks": rng.integers(0, 2, SLOTS).astype(float)}
        model.learn_one(event)
        events.append(event)
    return events


def _simulate(model: RidgeRanker, sim: RankSimulator, rounds: int) -> None:
    for _ in range(rounds):
        request = sim.request()
        decision = model.decide(request.x, actions=request.actions)
        ranking = np.array([r["index"] for r in decision.output["ranking"]])
        model.learn_one({**decision.context, "clicks": sim.clicks(request, ranking)})


@pytest.mark.slow
@pytest.mark.parametrize("anchor_share", [0.0, 0.1])
def test_logged_propensities_match_the_policy_frequencies(anchor_share: float) -> None:
    model = _model(temperature=0.5, epsilon=0.2, anchor_share=anchor_share)
    _play(model, 50)
    rng = np.random.default_rng(7)
    x, actions = rng.standard_normal(DX), rng.standard_normal((4, DA))
    n = 6000
    first: dict[int, int] = {}
    second: dict[tuple[int, int], int] = {}
    logged: dict[tuple[int, ...], float] = {}
    for _ in range(n):
        ranking = model.decide(x, actions=actions).output["ranking"]
        a, b = ranking[0]["index"], ranking[1]["index"]
        first[a] = first.get(a, 0) + 1
        second[a, b] = second.get((a, b), 0) + 1
        for key, p in (((a,), ranking[0]["probability"]), ((a, b), ranking[1]["probability"])):
            # one value per placement
            assert logged.setdefault(key, p) == pytest.approx(p, abs=1e-12)
    assert len(first) == 4  # epsilon keeps every candidate possible
    for a, count in first.items():
        p = logged[(a,)]
        assert abs(count / n - p) < 4 * np.sqrt(p * (1 - p) / n), a
    for (a, b), count in second.items():  # slot 1 given slot 0
        p, m = logged[a, b], first[a]
        assert abs(count / m - p) < 4 * np.sqrt(p * (1 - p) / m) + 1e-9, (a, b)
    assert sum(logged[(a,)] for a in first) == pytest.approx(1.0)


def test_learn_many_equals_learn_one_with_short_rankings() -> None:
    sequential = _model()
    events = _play(sequential, 120, slots=2)
    batched = _model()
    batched.learn_many(stack_events(events[:50]))
    batched.learn_many(stack_events(events[50:]))
    for name, value in sequential.get_state().items():
        np.testing.assert_allclose(batched.get_state()[name], value, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(batched.weights(), sequential.weights(), rtol=1e-8, atol=1e-10)


def _exact_ridge(events: list[dict[str, Any]], ridge: float, theta: tuple[float, ...],
                 rho0: float, rho1: float) -> np.ndarray:
    """The ridge solution of the module docstring, row by row from the events."""
    rows, targets = [], []
    for event in events:
        for k in range(int(event["shown"])):
            rows.append(joint_features(event["x"], event["actions"][k:k + 1])[0])
            targets.append((event["clicks"][k] - rho0) / ((1.0 - rho0 - rho1) * theta[k]))
    phi = np.array(rows)
    return np.linalg.solve(phi.T @ phi + ridge * np.eye(phi.shape[1]), phi.T @ targets)


@pytest.mark.slow
def test_lazy_solution_is_the_exact_ridge_solution_right_after_a_refresh() -> None:
    theta, rho0, rho1 = (1.0, 0.5, 0.25), 0.05, 0.1
    params = {"ridge": 0.7, "position_bias": theta, "rho0": rho0, "rho1": rho1,
              "half_life": None}  # the sums of every event (forgetting: test_forgetting.py)
    model = _model(**params)
    rng = np.random.default_rng(2)
    x, actions = rng.standard_normal(DX), rng.standard_normal((6, DA))
    events: list[dict[str, Any]] = []
    refreshed, stale = 0, 0
    for count in range(1, 121):
        events += _play(model, 1, seed=count)
        exact = joint_features(x, actions) @ _exact_ridge(events, 0.7, theta, rho0, rho1)
        if count % refresh_step(count) == 0:
            np.testing.assert_allclose(model.scores(x, actions), exact, rtol=1e-9, atol=1e-12)
            refreshed += 1
        else:  # between refreshes the decisions score with the last solution
            stale += not np.allclose(model.scores(x, actions), exact, rtol=1e-9, atol=1e-12)
    assert refreshed > 40 and stale > 20
    batched = _model(**params)
    batched.learn_many(stack_events(events[:77]))  # a batch ends with a refresh
    np.testing.assert_allclose(batched.scores(x, actions), joint_features(x, actions)
                               @ _exact_ridge(events[:77], 0.7, theta, rho0, rho1), rtol=1e-9)


def test_state_round_trips_into_the_same_rankings() -> None:
    model = _model()
    _play(model, 60)
    fresh = _model()
    fresh.set_state(model.get_state())
    rng = np.random.default_rng(3)
    for _ in range(10):
        x, actions = rng.standard_normal(DX), rng.standard_normal((6, DA))
        assert fresh.decide(x, False, actions=actions).output == \
            model.decide(x, False, actions=actions).output
    with pytest.raises(ParamError, match=r"state\.precision_"):
        fresh.set_state({**model.get_state(), "precision_": np.zeros((2, 2))})


def test_noise_rates_apply_to_events_learned_before() -> None:
    late, early = _model(), _model(rho0=0.1, rho1=0.2)
    events = _play(late, 40)
    early.learn_many(stack_events(events))
    late.set_noise_rates(0.1, 0.2)
    np.testing.assert_allclose(late.weights(), early.weights(), rtol=1e-9, atol=1e-12)


def test_joint_features_score_equals_the_fast_score() -> None:
    model = _model()
    _play(model, 30)
    rng = np.random.default_rng(5)
    x, actions = rng.standard_normal(DX), rng.standard_normal((5, DA))
    np.testing.assert_allclose(model.scores(x, actions),
                               joint_features(x, actions) @ model.weights(), rtol=1e-10)


def test_position_bias_from_bands_recovers_theta_on_equal_relevance() -> None:
    counts = np.array([[100.0, 300.0], [300.0, 100.0]])
    rates = np.array([0.2, 0.6])
    clicks = counts * rates * np.array([[1.0], [0.5]])
    theta, estimated = position_bias_from_bands(counts, clicks, rho0=0.0)
    np.testing.assert_allclose(theta, [1.0, 0.5])
    assert estimated.tolist() == [False, True]


@pytest.mark.slow
def test_position_bias_is_estimated_on_the_simulator_and_new_items_are_scored() -> None:
    sim = RankSimulator(n_features=DX, n_action_features=DA, theta=(1.0, 0.6, 0.35),
                        churn_every=500, seed=3)
    model = RidgeRanker(n_features=DX, n_action_features=DA, slots=SLOTS, seed=3,
                        rho0=sim.rho0, rho1=sim.rho1)
    _simulate(model, sim, 8000)
    theta, source = model.position_bias_estimate()
    assert source == "estimated"
    np.testing.assert_allclose(theta, sim.theta, atol=0.1)
    # items the model never saw, scored from their features alone
    rng = np.random.default_rng(11)
    fresh = rng.normal(0.0, 1.0 / np.sqrt(DA), (50, DA))
    x = np.r_[1.0, rng.normal(0.0, 1.0 / np.sqrt(DX - 1), DX - 1)]
    scores, truth = model.scores(x, fresh), sim.relevance(x, fresh)
    assert np.corrcoef(scores, truth)[0, 1] > 0.8
    assert np.ptp(scores) > 0.2


def test_configured_position_bias_is_used_and_reported() -> None:
    model = _model(position_bias=(1.0, 0.5, 0.25))
    theta, source = model.position_bias_estimate()
    assert source == "configured" and theta.tolist() == [1.0, 0.5, 0.25]
    assert _model().position_bias_estimate()[1] == "insufficient_data"


@pytest.mark.parametrize(("params", "field"), [
    ({"position_bias": (1.0, 0.5)}, "position_bias"),
    ({"position_bias": (0.9, 0.5, 0.2)}, "position_bias"),
    ({"position_bias": (1.0, 0.0, 0.2)}, "position_bias"),
    ({"position_bias": "1, 0.5, 0.2"}, "position_bias"),
    ({"epsilon": 1.5}, "epsilon"),
    ({"epsilon": 0.5, "anchor_share": 0.6}, "anchor_share"),
    ({"temperature": -1.0}, "temperature"),
    ({"theta_floor": 0.0}, "theta_floor"),
    ({"slots": 0}, "slots"),
    ({"n_action_features": 0}, "n_action_features"),
    ({"score_bands": 0}, "score_bands"),
    ({"rho0": 0.6, "rho1": 0.5}, "rho"),
])
def test_bad_parameters_raise_param_error_naming_the_field(params: dict[str, Any],
                                                           field: str) -> None:
    base = {"n_features": DX, "n_action_features": DA, "slots": SLOTS} | params
    with pytest.raises(ParamError, match=field):
        RidgeRanker(**base)


def test_bad_inputs_raise_param_error_naming_the_field() -> None:
    model = _model()
    x, actions = np.zeros(DX), np.zeros((4, DA))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"x": np.zeros(DX + 1), "actions": actions}, "features"),
        ({"x": x}, "actions"),
        ({"x": x, "actions": np.zeros((0, DA))}, "actions"),
        ({"x": x, "actions": np.zeros((4, DA + 1))}, "actions"),
        ({"x": x, "actions": np.full((4, DA), np.nan)}, "actions"),
        ({"x": x, "actions": actions, "slots": SLOTS + 1}, "slots"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ParamError, match=field):
            model.decide(kwargs.pop("x"), **kwargs)
    context = model.decide(x, actions=actions).context
    changes: list[tuple[dict[str, Any], str]] = [
        ({"clicks": np.array([0.0, 1.5, 0.0])}, "clicks"),
        ({"clicks": np.zeros(SLOTS + 1)}, "clicks"),
        ({"shown": np.int64(SLOTS + 1)}, "shown"),
        ({"actions": np.zeros((SLOTS, DA + 1))}, "actions")]
    for change, field in changes:
        event: dict[str, Any] = {**context, "clicks": np.zeros(SLOTS), **change}
        with pytest.raises(ParamError, match=field):
            model.learn_one(event)


def test_fewer_candidates_than_slots_fill_what_they_can() -> None:
    model = _model()
    decision = model.decide(np.ones(DX), actions=np.ones((2, DA)))
    assert [r["slot"] for r in decision.output["ranking"]] == [0, 1]
    assert int(decision.context["shown"]) == 2
    # the unshown slot's click is ignored, whatever it is
    model.learn_one({**decision.context, "clicks": np.array([1.0, 0.0, 7.0])})
    assert model.get_state()["band_rows_"][:2].sum() == 2.0
    assert model.get_state()["band_rows_"][2].sum() == 0.0


def test_slot_noise_solves_for_affine_corrected_clicks_and_can_be_dropped() -> None:
    model = _model(ridge=0.7, half_life=None)
    events = _play(model, 60)
    alpha, beta = (0.7, 0.4, 0.2), (0.15, 0.08, 0.03)
    before = model.weights()
    model.set_slot_noise((alpha, beta))
    rows, targets = [], []
    for event in events:
        for k in range(int(event["shown"])):
            rows.append(joint_features(event["x"], event["actions"][k:k + 1])[0])
            targets.append((event["clicks"][k] - beta[k]) / alpha[k])
    phi = np.array(rows)
    exact = np.linalg.solve(phi.T @ phi + 0.7 * np.eye(phi.shape[1]), phi.T @ targets)
    np.testing.assert_allclose(model.weights(), exact, rtol=1e-9, atol=1e-12)
    model.set_slot_noise(None)
    np.testing.assert_allclose(model.weights(), before, rtol=1e-12)
    with pytest.raises(ParamError, match="slot_noise"):
        model.set_slot_noise(((0.5, 0.0, 0.2), beta))


def test_placement_rows_are_the_shown_slots_in_order() -> None:
    events = _play(_model(), 5)
    slot, prob, score, click = RidgeRanker.placement_rows(stack_events(events))
    shown = [int(e["shown"]) for e in events]
    assert slot.tolist() == [k for n in shown for k in range(n)]
    assert prob.tolist() == [float(p) for e in events for p in e["probabilities"][:e["shown"]]]
    assert click.tolist() == [float(c) for e in events for c in e["clicks"][:e["shown"]]]
    assert score.shape == slot.shape
