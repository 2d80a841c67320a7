"""app.evaluation.rates in rank-log evaluations: each slot's clicks corrected by its examination
and trust bias, the rates' errors carried into the intervals.

The logs are :func:`app.sim.trust.simulated_placements` (examination (1, 0.6, 0.35),
``rho0_k`` (0.2, 0.12, 0.06), ``rho1`` 0.1, binary relevance, 6 candidates into 3 slots),
and the rates the per-slot estimator publishes on the same rows
(:func:`app.learners.noise_slots.estimate_slot_noise`), as the service would use them:
30,000 requests, where its widest intervals (each slot's rates from its own anchor bands)
are 0.07-0.08 wide, inside the default ``max_width`` 0.1 on every seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.heavy_tails import betting_interval, corrected_interval
from app.evaluation.rankings import RankLog, evaluate_ranking, uniform_placements
from app.evaluation.rates import SlotRates
from app.learners.noise_publish import slots_outcome
from app.learners.noise_slots import estimate_slot_noise
from app.sim.trust import RHO1, THETA, TRUST_RHO0, simulated_placements

SLOTS, CANDIDATES, REQUESTS = 3, 6, 30_000


def trust_log(seed: int, **policy: float) -> tuple[RankLog, np.ndarray, SlotRates]:
    """A rank log of :data:`REQUESTS` rankings, the true relevance placed in each slot
    (``n x 3``) and the per-slot rates estimated on it (published)."""
    slot, prob, score, click, relevance = simulated_placements(REQUESTS, seed=seed, **policy)
    # the anchors hold by construction (binary relevance); the rise test at its default
    # tolerance 0 refuses about 1 log in 7 by chance (one-sided at 95% in each band), so
    # the rates here are the estimate's at the settings these seeds were chosen with
    est = estimate_slot_noise(slot.astype(np.intp), prob, score, click, SLOTS,
                              flat_tolerance=0.01, recent_fraction=0.7)
    assert est.published, est.reason
    shape = (REQUESTS, SLOTS)
    log = RankLog(X=np.ones((REQUESTS, 1)), clicks=click.reshape(shape),
                  propensities=prob.reshape(shape), shown=np.full(REQUESTS, SLOTS),
                  candidates=np.full(REQUESTS, CANDIDATES))
    return log, relevance.reshape(shape), SlotRates.from_slots(slots_outcome(est))


def cases(result: dict[str, object], truth: np.ndarray) -> list[tuple[float, float, float]]:
    """``(truth, ci_low, ci_high)`` of each position's SNIPS and of the slates' RIPS."""
    positions = result["positions"]
    assert isinstance(positions, list)
    out = [(float(t), p["snips"]["ci_low"], p["snips"]["ci_high"])
           for t, p in zip(truth, positions, strict=True)]
    slates = result["slates"]
    assert isinstance(slates, dict)
    return [*out, (float(truth.sum()), slates["rips"]["ci_low"], slates["rips"]["ci_high"])]


def covered(rows: list[tuple[float, float, float]]) -> int:
    return sum(low <= truth <= high for truth, low, high in rows)


@pytest.mark.slow
def test_per_slot_rates_recover_the_relevance_the_logging_policy_placed_in_each_slot() -> None:
    # 3 seeds x (3 positions + the slates): 12 intervals at 95% (the rates' draws make them
    # err wide), so at most one miss; slot 0's rates applied to every slot (a scalar
    # correction, as before) miss slots 1 and 2 by more than 0.3 (their clicks are
    # examined 0.6 and 0.35 of the time), and so the slates
    found, scalar = [], []
    for seed in range(3):
        log, relevance, rates = trust_log(seed)
        truth = relevance.mean(axis=0)
        found += cases(evaluate_ranking(log, None, seed=seed, rates=rates), truth)
        flat = evaluate_ranking(log, None, rates.rho0[0], rates.rho1, seed=seed)
        scalar += cases(flat, truth)
    assert covered(found) >= len(found) - 1, found
    for truth, _, high in [row for i, row in enumerate(scalar) if i % 4 in (1, 2, 3)]:
        assert truth - high > 0.3, scalar


@pytest.mark.slow
def test_the_rates_errors_widen_the_intervals_of_a_uniform_ranking_to_cover_its_value() -> None:
    # A uniform ranking of the 6 candidates (half relevant on average) places relevance 0.5
    # in every slot and 1.5 per ranking; on logs of a policy exploring widely, 5 seeds x 4
    # intervals: with the rates' errors at least 18 of 20 hold the truth, each wider than
    # with the rates taken as exact
    found = []
    for seed in range(5):
        log, _, rates = trust_log(seed, temperature=1.0, epsilon=0.3)
        exact = SlotRates(rates.theta, rates.rho0, rates.rho1, (0.0,) * SLOTS, (0.0,) * SLOTS)
        target = uniform_placements(log)
        with_errors = cases(evaluate_ranking(log, target, seed=seed, rates=rates),
                            np.full(SLOTS, 0.5))
        without = cases(evaluate_ranking(log, target, seed=seed, rates=exact),
                        np.full(SLOTS, 0.5))
        found += with_errors
        for (_, low, high), (_, low0, high0) in zip(with_errors, without, strict=True):
            assert high - low > high0 - low0
    assert covered(found) >= 18, found


def small_log(seed: int = 0) -> RankLog:
    rng = np.random.default_rng(seed)
    n = 400
    return RankLog(X=rng.normal(size=(n, 2)), clicks=(rng.random((n, SLOTS)) < 0.4) * 1.0,
                   propensities=np.full((n, SLOTS), 0.5), shown=np.full(n, SLOTS),
                   candidates=np.full(n, CANDIDATES))


def test_rates_of_one_slot_are_the_scalar_rates_in_every_slot() -> None:
    log = small_log()
    scalar = evaluate_ranking(log, None, 0.1, 0.2, 0.01, 0.02, n_boot=50)
    same = evaluate_ranking(log, None, n_boot=50, rates=SlotRates.scalar(0.1, 0.2, 0.01, 0.02))
    assert scalar == same
    assert scalar["correction"]["reward"] == "h(f) = (f - rho0) / (1 - rho0 - rho1)"
    # theta 1 and the same rho0 in every slot, without errors: the same point values
    alike = SlotRates((1.0,) * SLOTS, (0.1,) * SLOTS, 0.2, (0.0,) * SLOTS, (0.0,) * SLOTS)
    per_slot = evaluate_ranking(log, None, n_boot=50, rates=alike)
    flat = evaluate_ranking(log, None, 0.1, 0.2, n_boot=50)
    for a, b in zip(per_slot["positions"], flat["positions"], strict=True):
        assert a["snips"]["value"] == pytest.approx(b["snips"]["value"], abs=1e-12)
    assert per_slot["slates"]["rips"]["value"] == pytest.approx(
        flat["slates"]["rips"]["value"], abs=1e-12)


def test_each_position_is_corrected_by_its_own_slot() -> None:
    log = small_log()
    rates = SlotRates(THETA, TRUST_RHO0, RHO1, (0.0,) * SLOTS, (0.0,) * SLOTS)
    result = evaluate_ranking(log, None, n_boot=20, rates=rates)
    alpha = np.array(THETA) * (1.0 - np.array(TRUST_RHO0) - RHO1)
    beta = np.array(THETA) * np.array(TRUST_RHO0)
    expected = (log.clicks.mean(axis=0) - beta) / alpha
    got = [p["snips"]["value"] for p in result["positions"]]
    assert got == pytest.approx(expected.tolist(), abs=1e-12)
    assert result["slates"]["rips"]["value"] == pytest.approx(expected.sum(), abs=1e-12)
    assert result["correction"]["theta"] == list(THETA)
    assert result["positions"][1]["correction"]["theta"] == [THETA[1]]


def test_slot_rates_read_the_noise_response_and_refuse_what_they_cannot_use() -> None:
    noise = {"status": "published", "interval": {"level": 0.9},
             "slots": [{"slot": k, "theta": t, "rho0": r, "rho1": RHO1,
                        "interval": {"theta": [t - 0.02 * k, t + 0.02 * k],
                                     "rho0": [r - 0.01, r + 0.01], "rho1": [0.08, 0.12]}}
                       for k, (t, r) in enumerate(zip(THETA, TRUST_RHO0, strict=True))]}
    rates = SlotRates.from_json(noise)
    assert rates.theta == THETA and rates.rho0 == TRUST_RHO0
    assert rates.rho0_se[0] == pytest.approx(0.01 / 1.6448536, rel=1e-6)  # z of 90%
    assert rates.theta_se[0] == 0.0
    with pytest.raises(ValueError, match="no published per-slot estimate"):
        SlotRates.from_json({"status": "insufficient_data", "reason": "too_few_events",
                             "slots": None})
    for theta_published in (False, True):  # values shown flagged, examination alone
        shown = [{**row, "published": {"theta": theta_published, "rho0": False,
                                       "rho1": False}} for row in noise["slots"]]
        with pytest.raises(ValueError, match="rates are not published"):
            SlotRates.from_json({**noise, "status": "insufficient_data", "slots": shown})
    with pytest.raises(ValueError, match="not both"):
        evaluate_ranking(small_log(), None, 0.1, 0.2, rates=rates)
    with pytest.raises(ValueError, match="cover 2 slots"):
        evaluate_ranking(small_log(), None, rates=SlotRates.from_slots(noise["slots"][:2]))
    with pytest.raises(ValueError, match="theta"):
        SlotRates((0.0,), (0.1,), 0.1, (0.0,), (0.0,))


def test_a_heavily_weighted_slot_is_widened_in_relevance_terms() -> None:
    # weights of a few events (placement probabilities down to 0.02): below slot 0 the
    # effective sample size is under 100, and the betting interval of the raw clicks is
    # mapped through each slot's own correction
    rng = np.random.default_rng(3)
    n = 400
    log = RankLog(X=np.ones((n, 1)), clicks=(rng.random((n, SLOTS)) < 0.3) * 1.0,
                  propensities=rng.uniform(0.02, 1.0, (n, SLOTS)), shown=np.full(n, SLOTS),
                  candidates=np.full(n, CANDIDATES))
    rates = SlotRates(THETA, TRUST_RHO0, RHO1, (0.0, 0.05, 0.05), (0.01,) * SLOTS, 0.01)
    result = evaluate_ranking(log, uniform_placements(log), n_boot=50, rates=rates)
    w = np.cumprod(uniform_placements(log) / log.propensities, axis=1)
    flagged = [p for p in result["positions"] if p.get("insufficient_data")]
    assert [p["position"] for p in flagged] == [1, 2]
    for position in flagged:
        k = position["position"]
        low, high = corrected_interval(*betting_interval(w[:, k], log.clicks[:, k]),
                                       rates.slot(k))
        assert position["snips"]["ci_low"] <= low and position["snips"]["ci_high"] >= high
        raw = betting_interval(w[:, k], log.clicks[:, k])
        assert high > (raw[1] - THETA[k] * TRUST_RHO0[k]) / (
            THETA[k] * (1.0 - TRUST_RHO0[k] - RHO1))  # theta's error widens it
