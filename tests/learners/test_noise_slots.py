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
from app.learners.noise_anchor import INTERVAL_TOO_WIDE, TOO_FEW_EVENTS
from app.learners.noise_publish import outcome, replaces_slots
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


def _estimate_rows(requests: int, seed: int) -> SlotEstimate:
    slot, prob, score, click, _ = simulated_placements(requests, seed=seed)
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


def test_examination_published_by_its_own_gate_before_the_rates() -> None:
    """At 8,000 requests every ``theta_k`` interval is narrow (about 0.06 and 0.09) while a
    ``rho0_k`` one is not (the bottom band is 0.03 of the rows): examination is published
    alone.  Coverage over 20 seeds of the 40 theta intervals: with true 95% intervals the
    misses are Binomial(40, 0.05), 6 or more with probability 0.014, so at least 34 must
    hold the truth."""
    theta = np.array(THETA)
    covered: list[bool] = []
    for seed in range(100, 120):
        slot, prob, score, click, _ = simulated_placements(8_000, seed=seed)
        est = estimate_slot_noise(slot, prob, score, click, len(THETA))
        # (anchor_not_flat instead on seed 105: the one-sided 95% test of each band's rise)
        assert (est.published, est.theta_published) == (False, True), seed
        too_wide = est.too_wide()
        assert all("theta" not in names for names in too_wide)
        assert any("rho0" in names for names in too_wide)
        covered += [bool(lo <= t <= hi) for (lo, hi), t in zip(est.theta_interval[1:],
                                                               theta[1:], strict=True)]
    assert len(covered) == 40
    assert sum(covered) >= 34


def test_estimate_few_rows_names_what_is_too_wide() -> None:
    est = _estimate_rows(2_000, seed=0)
    assert (est.published, est.theta_published, est.reason) == (
        False, False, INTERVAL_TOO_WIDE)
    assert "theta" in est.too_wide()[2] and "theta" not in est.too_wide()[0]
    widths = est.param_widths()
    assert widths["theta"][2] > est.max_width >= widths["theta"][0] == 0.0


def test_outcome_shows_values_not_published_flagged_with_their_widths() -> None:
    early, later = _estimate_rows(2_000, seed=0), _estimate_rows(8_000, seed=0)
    out = outcome(early)
    assert (out["status"], out["reason"], out["rho0"], out["theta_published"]) == (
        "insufficient_data", INTERVAL_TOO_WIDE, None, False)
    rows = out["slots"]
    assert [row["theta"] for row in rows] == early.theta.tolist()
    assert all(row["published"] == {"theta": False, "rho0": False, "rho1": False}
               for row in rows)
    assert [row["too_wide"] for row in rows] == early.too_wide()
    assert rows[2]["widths"]["theta"] == pytest.approx(
        rows[2]["interval"]["theta"][1] - rows[2]["interval"]["theta"][0])
    assert all(row["published"] == {"theta": True, "rho0": False, "rho1": False}
               for row in outcome(later)["slots"])
    assert replaces_slots(later, in_force_published=False)
    assert not replaces_slots(later, in_force_published=True)
    assert not replaces_slots(early, in_force_published=False)
    assert outcome(_estimate_rows(500, seed=2))["slots"] is None  # no values at all


def test_estimate_rates_refused_when_the_top_band_is_not_all_relevant() -> None:
    """Graded relevance ``sigmoid(1.5 l)``: about 0.97 of the top band is relevant, which
    puts ``rho1 = 1 - u_0`` about 0.01 high, a third of its interval's width; a rise of
    relevance within the band shows it.  Only examination, whose ratio does not need the
    band all relevant, is published."""
    theta = np.array(THETA)
    for seed in range(5):
        est = _estimate(seed, graded=1.5)
        assert (est.published, est.reason, est.theta_published) == (
            False, ANCHOR_NOT_FLAT, True), seed
        assert np.abs(est.theta - theta).max() <= 0.05


def test_rho1_holds_its_truth_where_the_top_band_is_not_all_relevant() -> None:
    """Graded ``sigmoid(1.5 l)``: the top 20% band's ``1 - u_0`` read 0.108-0.110 for 0.1,
    outside its interval on every seed; from the top 5% the (unpublished) ``rho1`` holds
    the truth.  10 seeds at 95%: 3 or more misses with probability 0.012, so at least 8
    must hold it."""
    covered = [bool(est.rho1_interval[0] <= RHO1 <= est.rho1_interval[1])
               for est in (_estimate(seed, graded=1.5) for seed in range(10))]
    assert len(covered) == 10 and sum(covered) >= 8, covered


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
