"""A rank model's predicted relevance at published per-slot rates, in process, against the truth.

``ridge_pl`` at its service defaults learns :data:`ROUNDS` rankings of a trust-bias stream
(:class:`app.sim.rank.RankSimulator` with ``trust``: 8 candidates, binary relevance,
examination (1, 0.6, 0.35), ``rho0_k`` (0.2, 0.12, 0.06), ``rho1`` 0.1) in batches of
:data:`BATCH`, while the service's per-slot refresh
(:class:`app.learners.slot_refresh.SlotRefresh`: the jobs role's estimate on the newest shown
slots every 2,500 of them, its publish rule, and once published the affine correction the
trainer hands the learner) runs on its placements.
At the service's default ``max_width`` the whole estimate is published only after about
15,000 rankings (``bench/bench_noise_slots.py --part publish``), too long through the
service for ``make test``, so this runs the same functions in process; the service's
``expected_reward`` of a ranked item is the learner's score of it clipped to [0, 1]
(:meth:`app.learners.rank.RidgeRanker.decide`).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from app.learners.noise_slots import click_affine
from app.learners.registry import build, learner_class
from app.learners.slot_refresh import SlotRefresh
from app.sim.rank import RankSimulator
from app.sim.trust import RHO1, THETA, TRUST_RHO0, Placements, placements

pytestmark = pytest.mark.slow

ROUNDS, BATCH, SEED = 20_000, 100, 2
#: Two-sided 99.9%: the one-seed tolerance's level (a seeded test that fails by chance
#: once in a thousand seeds).
Z = NormalDist().inv_cdf(0.9995)


@pytest.fixture(scope="module")
def learned() -> tuple[object, SlotRefresh, Placements]:
    """The learner, its refresh and the stream's rows after :data:`ROUNDS` rankings."""
    sim = RankSimulator(n_candidates=8, theta=THETA, trust=TRUST_RHO0, rho1=RHO1, binary=True,
                        seed=SEED)
    params = {**learner_class("rank", "ridge_pl").service_defaults,
              "n_action_features": sim.n_action_features, "slots": sim.slots}
    learner = build("rank", "ridge_pl", n_features=sim.n_features, params=params, seed=SEED)
    refresh = SlotRefresh(learner)
    rows = placements(sim, ROUNDS, learn_batch=BATCH, learner=learner, refresh=refresh)
    return learner, refresh, rows


def pooled_target(clicks: np.ndarray, rows: np.ndarray, theta: np.ndarray, rho0: np.ndarray,
                  rho1: float) -> float:
    """Mean affine-corrected click ``(f - beta_k) / alpha_k`` over rows whose slot ``k``
    holds ``rows[k]`` of them and ``clicks[k]`` clicks."""
    alpha, beta = click_affine(theta, rho0, rho1)
    return float(np.sum((clicks - beta * rows) / alpha) / rows.sum())


def test_expected_reward_is_the_relevance_of_the_learned_items_at_published_rates(
        learned: tuple[object, SlotRefresh, Placements]) -> None:
    """The ridge fit has an intercept, so the mean of its (unclipped) predictions over the
    rows it learned is the mean of its targets, the clicks corrected by the published
    per-slot estimate ``(f - beta_k) / alpha_k`` (up to ``lambda w_0 / N``, 1e-5 here);
    their mean is the rows' mean true relevance up to (i) the clicks' sampling error,
    ``sqrt(sum_i p_i (1 - p_i) / alpha_k^2) / N`` with the true click probabilities
    ``p_i``, and (ii) the estimate's error, each parameter's standard error (its 95%
    interval's wider side over 1.96) times the target's derivative in it (the
    ``theta_k``, which share slot 0's rows, added linearly).  The tolerance is ``Z`` times
    their sum (linear: the rates come from the same clicks).  Per slot the fit need not
    be calibrated (a linear model of a binary relevance: ``docs/api.md``).  Learning
    every slot's clicks at slot 0's examination (not corrected by the slot's ``theta``)
    reads about 0.2 low."""
    learner, refresh, rows = learned
    est = refresh.in_force
    assert est is not None and est.published, refresh.estimates[-1]  # the check runs
    sums = learner.rows_by_slot_  # type: ignore[attr-defined]
    n_k = sums[:, 0]
    assert n_k.sum() == rows.slot.shape[0]  # every row learned, none discounted
    predicted = float((sums @ learner.weights()).sum() / n_k.sum())  # type: ignore[attr-defined]
    truth = float(rows.relevance.mean())
    clicks = np.bincount(rows.slot, weights=rows.click, minlength=len(THETA))
    alpha, beta = click_affine(np.array(THETA), np.array(TRUST_RHO0), RHO1)
    p = beta[rows.slot] + alpha[rows.slot] * rows.relevance
    sampling = float(np.sqrt(np.sum(p * (1 - p) / alpha[rows.slot] ** 2))) / rows.slot.shape[0]
    m = len(THETA)
    centre = np.r_[est.theta, est.rho0, est.rho1]
    bounds = np.vstack([est.theta_interval, est.rho0_interval, [est.rho1_interval]])
    se = np.maximum(bounds[:, 1] - centre, centre - bounds[:, 0]) / NormalDist().inv_cdf(0.975)

    def target(v: np.ndarray) -> float:
        return pooled_target(clicks, n_k, v[:m], v[m:2 * m], float(v[2 * m]))

    step = 1e-6
    grad = np.array([(target(centre + step * e) - target(centre)) / step
                     for e in np.eye(centre.shape[0])])
    theta_part = float(np.sum(np.abs(grad[:m]) * se[:m]))
    rest = float(np.sqrt(np.sum((grad[m:] * se[m:]) ** 2)))
    tolerance = Z * (sampling + float(np.hypot(theta_part, rest)))
    per_slot = (sums @ learner.weights()) / n_k  # type: ignore[attr-defined]
    relevance = np.bincount(rows.slot, weights=rows.relevance, minlength=len(THETA)) / n_k
    assert abs(predicted - truth) <= tolerance, (predicted, truth, tolerance,
                                                 per_slot.round(3), relevance.round(3))
