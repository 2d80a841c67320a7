"""A refusal for a failed assumption withdraws a published estimate, in process: the rule
(:func:`app.learners.noise_publish.withdraws`) and a replayed learner that keeps the rates,
flagged (:class:`app.replay.noise.NoiseRefresh`, the service's schedule and rule)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.cli import build_parser
from app.learners.build import build
from app.learners.noise_anchor import ANCHOR_NOT_FLAT as LABEL_NOT_FLAT
from app.learners.noise_anchor import (
    ANCHOR_UNCHECKED,
    INTERVAL_TOO_WIDE,
    ONE_RIGHT_UNSTATED,
    TOO_FEW_EVENTS,
)
from app.learners.noise_publish import WITHDRAWING, anchor_estimate, outcome, withdraws
from app.learners.noise_slots import ANCHOR_NOT_FLAT as SLOT_NOT_FLAT
from app.learners.registry import learner_class
from app.learners.ridge import LinUCBDiag
from app.learners.slot_refresh import SlotRefresh
from app.replay import rank as rank_replay
from app.replay.noise import NoiseRefresh
from app.sim.feedback import noisy_clicks
from app.sim.relevance import graded
from app.sim.trust import placements
from tests.learners.test_noise_anchor import epsilon_greedy_plays

RATES = (0.1, 0.2)


def test_only_the_assumption_reasons_withdraw() -> None:
    assert LABEL_NOT_FLAT == SLOT_NOT_FLAT and set(WITHDRAWING) == {
        LABEL_NOT_FLAT, ANCHOR_UNCHECKED, ONE_RIGHT_UNSTATED}
    for reason, withdrawn in ((LABEL_NOT_FLAT, True), (ANCHOR_UNCHECKED, True),
                              (ONE_RIGHT_UNSTATED, True), (INTERVAL_TOO_WIDE, False),
                              (TOO_FEW_EVENTS, False)):
        assert withdraws({"status": "insufficient_data", "reason": reason}) is withdrawn
    assert not withdraws({"status": "published", "reason": "clipped"})


def test_a_scorer_whose_low_margins_pick_no_wrong_plays_withdraws() -> None:
    """An oracle scorer's plays publish; the same plays scored against their clicks (the
    check of ``test_noise_anchor_check.py``) are refused ``anchor_unchecked``: a withdrawal,
    where an estimate on too few of them is not."""
    K = 9
    prob, score, click = epsilon_greedy_plays(40_000, K, 0.05, 0.7, (0.2, 0.3), 0)
    stated = {"one_right_label": True}
    assert outcome(anchor_estimate(prob, score, click, K, {}, **stated))["status"] == "published"
    inverted = np.where(score < 1.0, score - 0.5 * click, score)
    assert withdraws(outcome(anchor_estimate(prob, inverted, click, K, {}, **stated)))
    assert not withdraws(outcome(anchor_estimate(prob[:500], inverted[:500], click[:500], K,
                                                 {}, **stated)))


def test_a_replayed_learner_keeps_withdrawn_rates_flagged() -> None:
    """``linucb_diag`` at its defaults in the 0.2/0.45/0.7 world, seed 3, the service's
    pipeline (batches of 500, the shadow scorer, an estimate every 2,500 plays): published
    at 15,000 plays (0.35, 0.41: wrong), refused ``anchor_unchecked`` at 17,500.  After the
    refusal the learner keeps the published rates (it learns with them) and its decisions
    say ``calibration_unreliable``; before withdrawal they stayed unflagged."""
    world = graded()
    rng = np.random.default_rng(3)
    relevance = world.make(rng)
    learner = LinUCBDiag(n_features=world.n_features, n_classes=world.n_classes, seed=3)
    refresh = NoiseRefresh(learner, "anchor", {}, world.n_classes, seed=3,
                           one_right_label=True)
    flags: list[tuple[str, bool, tuple[float, float]]] = []
    for _ in range(17_500 // 500):
        X = world.inputs(rng, 500)
        decisions = learner.decide_many(X)
        played = np.array([int(d.context["played"]) for d in decisions])
        prob = np.array([float(d.context["prob"]) for d in decisions])
        p = relevance(X)[np.arange(500), played]
        click = noisy_clicks((rng.random(500) < p).astype(float), *RATES, rng)
        learner.learn_many({"x": X, "played": played, "click": click, "prob": prob,
                            "greedy": played})
        before = len(refresh.estimates)
        refresh.observe([{"x": x, "played": a, "click": f, "prob": q}
                         for x, a, f, q in zip(X, played, click, prob, strict=True)])
        if len(refresh.estimates) > before:
            last: dict[str, Any] = refresh.estimates[-1]
            shown = learner.decide(X[0]).output["calibration_unreliable"]
            flags.append((last["reason"] or last["status"], shown, (learner.rho0, learner.rho1)))
    assert [reason for reason, _, _ in flags[-2:]] == ["published", ANCHOR_UNCHECKED], flags
    (_, published_flag, rates), (_, withdrawn_flag, kept) = flags[-2:]
    assert published_flag is False and withdrawn_flag is True, flags
    assert kept == rates and abs(rates[0] - RATES[0]) > 0.1, flags  # wrong, kept, flagged


@pytest.mark.slow
def test_a_rank_learner_keeps_a_withdrawn_per_slot_estimate_flagged() -> None:
    """``ridge_pl`` at service defaults on the 50-candidate world (click flips (0.03, 0.3),
    graded relevance), seed 6, the service's per-slot refresh: published whole at 12,600
    requests, refused ``anchor_not_flat`` (relevance still rising within the top band) at
    15,300.  The learner keeps the published estimate in force (its rates and per-slot
    correction) and its rankings say ``calibration_unreliable``; before withdrawal they
    did not."""
    args = build_parser().parse_args(
        ["replay", "--task", "rank", "--dataset", "sim", "--seed", "6", "--candidates", "50",
         "--context-features", "16", "--action-features", "16", "--click-noise", "0.03,0.3"])
    sim = rank_replay.simulator(args, 6)
    params = {**learner_class("rank", "ridge_pl").service_defaults,
              "n_action_features": sim.n_action_features, "slots": sim.slots}
    learner = build("rank", "ridge_pl", n_features=sim.n_features, params=params, seed=6)
    refresh = SlotRefresh(learner)
    placements(sim, 15_300, seed=6, learn_batch=100, learner=learner, refresh=refresh)
    reasons = [e["reason"] or e["status"] for e in refresh.estimates]
    assert reasons[-4:] == ["published"] * 3 + [SLOT_NOT_FLAT], reasons
    assert refresh.in_force is not None and refresh.in_force.published
    published = refresh.estimates[-2]
    assert (learner.rho0, learner.rho1) == (published["rho0"], published["rho1"])
    request = sim.request()
    ranking = learner.decide(request.x, actions=request.actions).output
    assert ranking["calibration_unreliable"] is True, ranking
