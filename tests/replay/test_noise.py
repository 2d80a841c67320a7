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


def replay_estimates(*options: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The estimates of a 20,000-request rank replay at the service's defaults (as
    ``bench/bench_noise_slots.py --part publish`` runs it) and the stream's truth per slot."""
    from app.cli import build_parser
    from app.replay import rank as rank_replay

    args = build_parser().parse_args(["replay", "--task", "rank", "--dataset", "sim",
                                      "--rounds", "20000", "--learn-batch", "100", *options])
    extra = rank_replay.run(args, args.seed, lambda n: None).extra
    return extra["noise_estimates"], extra["slot_noise_true"]


def test_examination_of_a_graded_stream_holds_its_truth_in_every_published_interval() -> None:
    """Seed 8 of the default stream with 8 candidates (graded relevance): with one top band
    over the whole buffer the examination in force at 20,000 requests read ``theta_1``
    0.575 [0.549, 0.601] for 0.617 (the band's items in slot 1 were 0.94 relevant, 0.98 in
    slot 0; ``bench/results/noise-slots-publish-pooled.json``).  Compared within strata of
    one scorer and score, every ``theta_k`` interval it publishes holds the truth."""
    estimates, truth = replay_estimates("--seed", "8", "--candidates", "8")
    published = [e for e in estimates if e["status"] == "published" or e.get("theta_published")]
    assert published, estimates[-1]  # the check runs
    missed = [(e["t"], k, row["theta"], row["interval"]["theta"])
              for e in published for k, row in enumerate(e["slots"])
              if not row["interval"]["theta"][0] <= truth[k]["theta"]
              <= row["interval"]["theta"][1]]
    assert missed == [], missed


def test_a_small_lower_slot_rate_holds_its_truth_in_every_published_interval() -> None:
    """Seed 4 of the trust-bias world with 8 candidates: slot 2's bottom band clicks at
    ``theta_2 rho0_2 = 0.021`` (about 10 clicks on its 475 rows, 5 on this seed), where a
    symmetric ``v +- z se`` read ``rho0_2`` 0.027 [0.001, 0.053] for 0.06 (and missed on
    the 2 estimates before it); each side from ``v_2``'s score interval, every published
    ``rho0_k`` interval holds the truth."""
    estimates, truth = replay_estimates("--seed", "4", "--candidates", "8", "--trust",
                                        "0.2,0.12,0.06", "--click-noise", "0,0.1", "--binary")
    published = [e for e in estimates if e["status"] == "published"]
    assert published, estimates[-1]  # the check runs
    missed = [(e["t"], k, row["rho0"], row["interval"]["rho0"])
              for e in published for k, row in enumerate(e["slots"])
              if not row["interval"]["rho0"][0] <= truth[k]["rho0"] <= row["interval"]["rho0"][1]]
    assert missed == [], missed
