"""The rank learner with features per slot and candidates allowed per slot (what a
Personalizer multi-slot rank decides with): each slot scored with its own features, draws
only among the candidates it allows and not placed before, exact logged propensities."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.rank import RidgeRanker

DX, DA, SLOTS = 2, 3, 3


def _model(**params: float) -> RidgeRanker:
    return RidgeRanker(n_features=DX, n_action_features=DA, slots=SLOTS, seed=0, **params)


def _learned(model: RidgeRanker, best: list[int], rounds: int = 600) -> RidgeRanker:
    """``model`` after ``rounds`` events where slot ``k`` is clicked exactly when it holds
    candidate ``best[k]``; candidate ``i`` in slot ``k`` has the one-hot feature of the pair
    ``(k, i)`` (so only features per slot can tell the slots' best apart)."""
    rng = np.random.default_rng(3)
    A = _pair_features(len(best))
    for _ in range(rounds):
        decision = model.decide(rng.standard_normal(DX), actions=A)
        rows = [r["index"] for r in decision.output["ranking"]]
        clicks = np.zeros(SLOTS)
        clicks[:len(rows)] = [float(i == best[k]) for k, i in enumerate(rows)]
        model.learn_one({**decision.context, "clicks": clicks})
    return model


def _pair_features(slots: int) -> np.ndarray:
    """``(slots, DA, DA)``: candidate ``i`` in slot ``k`` has feature ``(i + k) % DA``."""
    return np.stack([np.roll(np.eye(DA), k, axis=1) for k in range(slots)])


def test_each_slot_is_scored_with_its_own_features() -> None:
    # candidate i in slot k has feature (i + k) % 3; the clicked one per slot has feature 0
    best = [0, 2, 1]
    model = _learned(_model(epsilon=0.3, temperature=0.0), best)
    decision = model.decide(np.zeros(DX), False, actions=_pair_features(SLOTS))
    assert decision.output["greedy"] == best
    assert [r["index"] for r in decision.output["ranking"]] == best
    assert decision.context["shown"] == SLOTS
    # slot k logs the features its candidate had in slot k
    np.testing.assert_array_equal(decision.context["actions"], np.tile(np.eye(DA)[0], (3, 1)))


def test_a_slot_takes_only_candidates_it_allows_and_not_placed_before() -> None:
    model = _model(epsilon=1.0)  # uniform draws: every allowed candidate is possible
    allowed = np.array([[True, True, False, False],
                        [True, True, True, False],
                        [False, True, True, True]])
    A = np.tile(np.eye(4, DA), (SLOTS, 1, 1))
    seen = set()
    for _ in range(300):
        ranking = model.decide(np.ones(DX), actions=A, allowed=allowed).output["ranking"]
        rows = [r["index"] for r in ranking]
        assert len(set(rows)) == SLOTS
        assert all(allowed[k, i] for k, i in enumerate(rows))
        # uniform over what is left: slot k's probability is 1 / (allowed and free)
        for k, r in enumerate(ranking):
            free = allowed[k] & ~np.isin(np.arange(4), rows[:k])
            assert r["probability"] == pytest.approx(1.0 / free.sum())
        seen.add(tuple(rows))
    # every feasible slate was drawn: (0,1,2) (0,1,3) (0,2,1) (0,2,3) (1,0,2) (1,0,3)
    # (1,2,3); 300 uniform draws miss one of them with probability < 7 (6/7)^300 < 1e-18
    assert len(seen) == 7


def test_logged_propensities_per_slot_match_the_draw_frequencies() -> None:
    model = _learned(_model(epsilon=0.2, temperature=0.3), [0, 2, 1], rounds=200)
    A = _pair_features(2)
    counts: dict[tuple[int, ...], int] = {}
    logged: dict[tuple[int, ...], float] = {}
    n = 4000
    for _ in range(n):
        ranking = model.decide(np.ones(DX), actions=A).output["ranking"]
        a, b = ranking[0]["index"], ranking[1]["index"]
        for key, p in (((a,), ranking[0]["probability"]),
                       ((a, b), ranking[1]["probability"])):
            counts[key] = counts.get(key, 0) + 1
            assert logged.setdefault(key, p) == pytest.approx(p, abs=1e-12)
    for key, count in counts.items():
        # slot 0's frequency over n, slot 1's given slot 0 over slot 0's count: 4 standard
        # deviations of a binomial share
        m = n if len(key) == 1 else counts[key[:1]]
        p = logged[key]
        assert abs(count / m - p) < 4 * np.sqrt(p * (1 - p) / m) + 1e-9, key
    assert sum(logged[key] for key in counts if len(key) == 1) == pytest.approx(1.0)


def test_a_slot_without_a_candidate_left_is_refused() -> None:
    allowed = np.array([[True, False], [True, False]])
    with pytest.raises(ParamError, match="no candidate left"):
        _model().decide(np.ones(DX), actions=np.ones((2, 2, DA)), allowed=allowed)
    with pytest.raises(ParamError, match="slots"):
        _model().decide(np.ones(DX), actions=np.ones((2, 2, DA)), slots=1)
    with pytest.raises(ParamError, match="actions"):
        _model().decide(np.ones(DX), actions=np.ones((SLOTS + 1, 5, DA)))


def test_following_a_baseline_per_slot_places_it_with_probability_one() -> None:
    model = _learned(_model(), [0, 2, 1], rounds=100)
    allowed = np.array([[True, True, False], [True, True, True], [True, True, True]])
    A = _pair_features(SLOTS)
    decision = model.follow_ranking(np.ones(DX), [1, 2, 0], actions=A, allowed=allowed)
    assert [(r["index"], r["probability"]) for r in decision.output["ranking"]] == \
        [(1, 1.0), (2, 1.0), (0, 1.0)]
    np.testing.assert_array_equal(decision.context["actions"], A[[0, 1, 2], [1, 2, 0]])
    with pytest.raises(ParamError, match="does not allow"):
        model.follow_ranking(np.ones(DX), [2, 1, 0], actions=A, allowed=allowed)
