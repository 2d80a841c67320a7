"""The service's per-slot estimate in a replay (:class:`app.learners.slot_refresh.SlotRefresh`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.noise_publish import outcome, pack_slots, slot_estimate
from app.learners.rank import RidgeRanker
from app.learners.slot_refresh import SlotRefresh
from app.sim.trust import simulated_placements

REQUESTS = 40_000


def _batches() -> tuple[Any, tuple[np.ndarray, ...]]:
    """Events of a trust-bias stream (3 slots shown each) as a learner logs them."""
    rows = simulated_placements(REQUESTS, seed=0)
    slot, prob, score, click = rows[:4]

    def batch(start: int, stop: int) -> dict[str, np.ndarray]:
        return {"shown": np.full(stop - start, 3),
                "probabilities": prob.reshape(-1, 3)[start:stop],
                "scores": score.reshape(-1, 3)[start:stop],
                "clicks": click.reshape(-1, 3)[start:stop]}
    return batch, (slot, prob, score, click)


def test_slot_refresh_estimates_by_the_services_rule_and_publishes_to_the_learner() -> None:
    batch, (slot, prob, score, click) = _batches()
    learner = RidgeRanker(n_features=2, n_action_features=1, slots=3, seed=0)
    refresh = SlotRefresh(learner)
    assert not learner.noise_rates_reliable  # initial rates await an estimate
    refresh.observe(batch(0, 800))  # 2,400 shown slots: fewer than ANCHOR_EVERY new ones
    assert refresh.estimates == []
    refresh.observe(batch(800, REQUESTS))
    (out,) = refresh.estimates
    # the service's estimate of the same rows (its newest SLOT_BUFFER), published alike
    assert out == {"t": REQUESTS, **outcome(slot_estimate(prob, score, pack_slots(slot, click)))}
    assert out["status"] == "published" and refresh.in_force is not None
    assert learner.noise_rates_reliable
    assert (learner.rho0, learner.rho1) == (out["rho0"], out["rho1"])
    refresh.finish()  # no new rows since: nothing to estimate at the end
    assert len(refresh.estimates) == 1


def test_slot_refresh_estimates_the_new_rows_at_the_end_and_keeps_a_published_one() -> None:
    batch, _ = _batches()
    learner = RidgeRanker(n_features=2, n_action_features=1, slots=3, seed=0)
    refresh = SlotRefresh(learner)
    refresh.observe(batch(0, REQUESTS))
    published, rates = refresh.in_force, (learner.rho0, learner.rho1)
    followed = batch(0, 30_000) | {"probabilities": np.ones((30_000, 3))}  # none randomised
    refresh.observe(followed)
    assert refresh.estimates[-1]["reason"] == "no_randomised_placements"
    assert refresh.in_force is published and (learner.rho0, learner.rho1) == rates
    refresh.observe(batch(0, 20))  # 60 rows: not due until the run ends
    assert len(refresh.estimates) == 2
    refresh.finish()
    assert [e["t"] for e in refresh.estimates] == [REQUESTS, REQUESTS + 30_000,
                                                   REQUESTS + 30_020]


def test_slot_refresh_puts_examination_alone_in_force_until_the_whole_is_published() -> None:
    # 8,000 requests: every theta interval narrow, a rho0_k one not (as in the service, the
    # learner then corrects examination at its initial rates, still flagged unreliable)
    batch, _ = _batches()
    learner = RidgeRanker(n_features=2, n_action_features=1, slots=3, seed=0)
    refresh = SlotRefresh(learner)
    refresh.observe(batch(0, 8_000))
    est = refresh.in_force
    assert est is not None and est.theta_published and not est.published
    assert refresh.estimates[-1]["status"] == "insufficient_data"
    assert (learner.rho0, learner.rho1, learner.noise_rates_reliable) == (0.0, 0.0, False)
    alpha, beta = learner._affine  # type: ignore[misc]
    np.testing.assert_allclose(alpha, est.theta)
    np.testing.assert_allclose(beta, 0.0)
    refresh.observe(batch(8_000, REQUESTS))
    assert refresh.in_force is not None and refresh.in_force.published
    assert learner.noise_rates_reliable
