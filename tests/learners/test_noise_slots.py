"""Per-slot examination and click noise under trust bias (app.learners.noise_slots).

The streams are :func:`app.sim.trust.simulated_placements`: binary relevance decided by
a latent score, examination (1, 0.6, 0.35), ``rho0_k`` (0.2, 0.12, 0.06), ``rho1`` 0.1,
``anchor_share`` 0.03.  The tolerances are the issue's (theta 0.05, rho0_k 0.03, rho1
0.05).  Each ``rho0_k`` rests on its slot's share of the bottom band (about 0.03 of the
requests): its standard error is about 0.017 at 30,000 requests (0.03 is under 2 of
them) and 0.012 at the 60,000 used here, so each bound is about 2.5 standard errors or
more (theta 0.01, rho1 0.005).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.noise_anchor import TOO_FEW_EVENTS
from app.learners.noise_slots import (
    ANCHOR_NOT_FLAT,
    NOT_RANDOMISED,
    SlotEstimate,
    estimate_slot_noise,
)
from app.sim.trust import RHO1, THETA, TRUST_RHO0, simulated_placements

REQUESTS = 60_000
SEEDS = range(5)


def _estimate(seed: int, graded: float | None = None, request_sd: float = 0.0
              ) -> SlotEstimate:
    slot, prob, score, click, _ = simulated_placements(REQUESTS, seed=seed, graded=graded,
                                                       request_sd=request_sd)
    return estimate_slot_noise(slot, prob, score, click, len(THETA))


def _truth() -> tuple[np.ndarray, np.ndarray, float]:
    return np.array(THETA), np.array(TRUST_RHO0), RHO1


@pytest.mark.slow
@pytest.mark.parametrize("request_sd", [0.0, 2.0])
def test_estimate_binary_relevance_within_tolerance_and_covered(request_sd: float) -> None:
    """``request_sd`` 2: the share of relevant items of a score band between the anchors
    differs by slot (a request's shift, half seen by the scorer, sends its items lower);
    a fit sharing that share across slots covered the truth in half the cases."""
    theta, rho0, rho1 = _truth()
    covered: list[bool] = []
    for seed in SEEDS:
        est = _estimate(seed, request_sd=request_sd)
        assert est.published, (seed, est.reason)
        assert np.abs(est.theta - theta).max() <= 0.05
        assert np.abs(est.rho0 - rho0).max() <= 0.03
        assert abs(est.rho1 - rho1) <= 0.05
        assert est.widths.max() <= 0.1
        covered += [bool(lo <= t <= hi) for (lo, hi), t in zip(est.theta_interval[1:],
                                                               theta[1:], strict=True)]
        covered += [bool(lo <= r <= hi) for (lo, hi), r in zip(est.rho0_interval, rho0,
                                                               strict=True)]
        covered.append(est.rho1_interval[0] <= rho1 <= est.rho1_interval[1])
    assert len(covered) == 6 * len(SEEDS)
    assert np.mean(covered) >= 0.85


@pytest.mark.slow
@pytest.mark.parametrize("graded", [0.7, 1.0, 1.5, 3.0])
def test_estimate_graded_relevance_publishes_nothing_wrong(graded: float) -> None:
    theta, rho0, rho1 = _truth()
    for seed in range(3):
        est = _estimate(seed, graded)
        if est.published:
            assert np.abs(est.theta - theta).max() <= 0.05
            assert np.abs(est.rho0 - rho0).max() <= 0.05
            assert abs(est.rho1 - rho1) <= 0.05
        elif graded < 1.5:
            assert est.reason == ANCHOR_NOT_FLAT


def test_estimate_no_item_surely_relevant_refused() -> None:
    est = _estimate(0, graded=0.5)
    assert not est.published and est.reason == ANCHOR_NOT_FLAT
    assert est.flatness[0] > 0.05


def test_estimate_deterministic_placements_refused() -> None:
    slot, _, score, click, _ = simulated_placements(2_000, seed=1)
    est = estimate_slot_noise(slot, np.ones_like(score), score, click, 3)
    assert (est.published, est.reason, est.n_events) == (False, NOT_RANDOMISED, 0)


def test_estimate_few_rows_insufficient_with_counts() -> None:
    slot, prob, score, click, _ = simulated_placements(500, seed=2)
    est = estimate_slot_noise(slot, prob, score, click, 3)
    assert (est.published, est.reason) == (False, TOO_FEW_EVENTS)
    assert est.n_slot.sum() == est.n_events > 0
    assert np.isnan(est.theta).all()


def test_estimate_affine_matches_the_click_model() -> None:
    """``beta_k = theta_k rho0_k`` and ``alpha_k = theta_k (1 - rho1 - rho0_k)`` each within
    3 of its own standard errors (delta method from the estimate's 95% intervals; the six
    hold together with probability 0.98): one tolerance per slot, as their errors differ
    fourfold (``beta_2``'s is 0.003, ``beta_0``'s 0.013; a shared 0.03 passed
    ``rho0_k`` read as ``theta_k rho0_k``)."""
    est = _estimate(3)
    alpha, beta = est.affine()
    theta, rho0, rho1 = _truth()
    se = [(iv[:, 1] - iv[:, 0]) / (2 * 1.959964)
          for iv in (est.theta_interval, est.rho0_interval, np.array([est.rho1_interval]))]
    se_beta = np.hypot(est.rho0 * se[0], est.theta * se[1])
    se_alpha = np.sqrt(((1 - est.rho1 - est.rho0) * se[0]) ** 2
                       + est.theta**2 * (se[1] ** 2 + se[2] ** 2))
    assert np.all(np.abs(beta - theta * rho0) <= 3 * se_beta), (beta, se_beta)
    assert np.all(np.abs(alpha - theta * (1 - rho1 - rho0)) <= 3 * se_alpha), (alpha, se_alpha)


@pytest.mark.parametrize(("field", "columns"), [
    ("slot", (np.array([0, 3]), np.full(2, 0.5), np.zeros(2), np.zeros(2))),
    ("prob", (np.array([0, 1]), np.array([0.5, 0.0]), np.zeros(2), np.zeros(2))),
    ("click", (np.array([0, 1]), np.full(2, 0.5), np.zeros(2), np.array([0.0, 0.5]))),
    ("score", (np.array([0, 1]), np.full(2, 0.5), np.array([0.0, np.nan]), np.zeros(2))),
    ("columns", (np.array([0, 1]), np.full(3, 0.5), np.zeros(2), np.zeros(2))),
])
def test_estimate_bad_columns_named(field: str, columns: tuple[np.ndarray, ...]) -> None:
    slot, prob, score, click = columns
    with pytest.raises(ParamError) as err:
        estimate_slot_noise(slot, prob, score, click, 3)
    assert err.value.field == field
