"""Running IPS/SNIPS sums: batch-additive, equal to the direct formulas, intervals that cover."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.running import (
    CLICK_SUMS,
    Rates,
    RunningValue,
    click_sums,
    logged_click,
    logged_propensity,
    match_weights,
)
from app.learners.proxy import unbiased_click


def test_sums_add_up_batches_and_match_the_direct_estimates() -> None:
    rng = np.random.default_rng(0)
    n = 4000
    w, r = rng.random(n) * 3, rng.random(n)
    value = RunningValue()
    for part in np.array_split(np.arange(n), 7):
        value.add(w[part], r[part])
    again = RunningValue(value.to_list())
    snips, mean_w, mean_r = (w * r).sum() / w.sum(), w.mean(), r.mean()
    psi_snips = (w * r - snips * w) / mean_w
    psi_diff = psi_snips - (r - mean_r)
    z = 1.959963984540054
    for got, estimate, terms in [
            (again.snips(), snips, psi_snips), (again.snips_minus_champion(), snips - mean_r,
                                                psi_diff),
            (again.ips(), (w * r).mean(), w * r - (w * r).mean()),
            (again.champion(), mean_r, r - mean_r)]:
        half = z * np.sqrt((terms ** 2).sum() / (n * (n - 1)))
        assert got.estimate == pytest.approx(estimate)
        assert got.ci_high - got.estimate == pytest.approx(half)
        assert got.estimate - got.ci_low == pytest.approx(half)
    assert again.n == n


def test_no_events_or_no_weight_gives_no_estimate() -> None:
    empty = RunningValue()
    assert empty.snips().estimate is None and empty.champion().estimate is None
    unmatched = RunningValue()
    unmatched.add(np.zeros(10), np.ones(10))
    assert unmatched.snips().estimate is None and unmatched.ips().estimate == 0.0
    one = RunningValue()
    one.add(np.ones(1), np.ones(1))
    assert one.champion().ci_low is None and one.champion().estimate == 1.0
    with pytest.raises(ValueError, match="sums"):
        RunningValue([1.0, 2.0])


def test_a_drawn_policy_is_estimated_within_its_interval_most_of_the_time() -> None:
    """Logging uniform over 3 actions, target always action 0 (value 0.7): the draw
    indicator weights cover the true value in about 95% of 200 logs."""
    covered, diffs = 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n = 600
        logged = rng.integers(0, 3, n)
        means = np.array([0.7, 0.4, 0.2])
        r = (rng.random(n) < means[logged]).astype(float)
        w = match_weights(np.zeros(n, dtype=int), logged, np.full(n, 1 / 3))
        value = RunningValue()
        value.add(w, r)
        snips, diff = value.snips(), value.snips_minus_champion()
        covered += snips.ci_low <= 0.7 <= snips.ci_high
        diffs += diff.ci_low <= 0.7 - means.mean() <= diff.ci_high
    assert covered >= 180 and diffs >= 180, (covered, diffs)


def test_plays_and_propensities_of_a_log() -> None:
    assert logged_propensity({"prob": np.array([0.5, 0.25])}).tolist() == [0.5, 0.25]
    assert logged_propensity({"log_prob": np.log(np.array([0.5]))}).tolist() == \
        pytest.approx([0.5])
    assert logged_propensity({"x": np.zeros(2)}) is None
    slates = {"probabilities": np.array([[0.5, 0.2], [0.25, 1.0]]),
              "clicks": np.array([[1.0, 0.0], [0.0, 1.0]])}
    assert logged_propensity(slates).tolist() == [0.5, 0.25]
    assert logged_click(slates).tolist() == [1.0, 0.0]
    assert logged_click({"click": np.array([[1.0]])}).tolist() == [1.0]
    assert logged_click({"x": np.zeros(2)}) is None
    sets = match_weights(np.array([[0, 1], [2, 1]]), np.array([[0, 1], [1, 2]]),
                         np.array([0.5, 0.5]))
    assert sets.tolist() == [2.0, 0.0]


def test_a_logged_probability_that_rounds_to_0_is_left_out() -> None:
    """exp(-800) is 0: the matching play's weight would be infinite and its sums NaN for good;
    the event is left out (NaN weight, as the challengers' sums skip)."""
    p = logged_propensity({"log_prob": np.array([-800.0, np.log(0.5)])})
    assert p is not None and np.isnan(p[0]) and p[1] == pytest.approx(0.5)
    w = match_weights(np.array([1, 2]), np.array([1, 2]), p)
    assert np.isnan(w[0]) and w[1] == pytest.approx(2.0)
    value = RunningValue()
    value.add(w[~np.isnan(w)], np.array([1.0]))
    assert value.snips().estimate == 1.0



def test_click_sums_read_at_rates_equal_the_sums_of_h() -> None:
    """Sums of clicks read at rates (no error) give exactly the estimates of sums of h(f);
    stats saved as sums of h(f) (no ``reward``) are mapped back to clicks."""
    rng = np.random.default_rng(3)
    w, f = rng.random(500) * 3, (rng.random(500) < 0.4).astype(float)
    clicks, h = RunningValue(), RunningValue()
    clicks.add(w, f)
    h.add(w, unbiased_click(f, 0.2, 0.1))
    read = clicks.corrected(Rates(0.2, 0.1))
    for name in ("champion", "ips", "snips", "snips_minus_champion"):
        got, want = getattr(read, name)(), getattr(h, name)()
        assert got.to_dict() == pytest.approx(want.to_dict()), name
    legacy = click_sums({"sums": h.to_list()}, Rates(0.2, 0.1))
    assert legacy.to_list() == pytest.approx(clicks.to_list())
    saved = click_sums({"sums": clicks.to_list(), "reward": CLICK_SUMS}, Rates(0.2, 0.1))
    assert saved.to_list() == clicks.to_list()


def test_a_value_read_at_estimated_rates_covers_the_truth_the_old_sums_did_not() -> None:
    """A noisy stream (rho0 0.3, rho1 0.2) scored while the rates were the initial 0/0 for
    its first half, then an estimate (0.31, 0.19; standard errors 0.01) for the second:
    rewards h(f) at the rates in force when each batch came (the sums kept before) miss the
    target's true value 0.7; the click sums read at the estimate, its error in the interval,
    cover it, and the champion's true value 0.433 too."""
    rng = np.random.default_rng(0)
    n = 20_000
    logged = rng.integers(0, 3, n)
    means = np.array([0.7, 0.4, 0.2])
    true = rng.random(n) < means[logged]
    f = np.where(true, rng.random(n) >= 0.2, rng.random(n) < 0.3).astype(float)
    w = match_weights(np.zeros(n, dtype=int), logged, np.full(n, 1 / 3))
    half = n // 2
    in_force, clicks = RunningValue(), RunningValue()
    in_force.add(w[:half], f[:half])
    in_force.add(w[half:], unbiased_click(f[half:], 0.31, 0.19))
    clicks.add(w, f)
    old = in_force.snips()
    assert not old.ci_low <= 0.7 <= old.ci_high, old
    read = clicks.corrected(Rates(0.31, 0.19, 0.01, 0.01))
    for got, truth in ((read.snips(), 0.7), (read.ips(), 0.7),
                       (read.champion(), means.mean()),
                       (read.snips_minus_champion(), 0.7 - means.mean())):
        assert got.ci_low <= truth <= got.ci_high, (got, truth)
    # the rates' error widens the interval: without it the SNIPS interval is narrower
    exact = clicks.corrected(Rates(0.31, 0.19)).snips()
    assert exact.ci_high - exact.ci_low < read.snips().ci_high - read.snips().ci_low
