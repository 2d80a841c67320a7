"""app.evaluation.heavy_tails: the betting interval of an importance-weighted value, and the
flag of an evaluation whose weights rest on a few events."""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.estimators import evaluate_weights
from app.evaluation.heavy_tails import (
    MIN_ESS,
    betting_interval,
    corrected_interval,
    guard_heavy_tails,
)
from app.evaluation.rates import SlotRates


def heavy_log(seed: int, n: int = 2_000, p: float = 0.005, value: float = 0.3
              ) -> tuple[np.ndarray, np.ndarray]:
    """Weights ``1 / p`` with probability ``p``, else 0 (mean 1, about ``n p`` heavy
    events), and clicks of rate ``value``."""
    rng = np.random.default_rng(seed)
    w = np.where(rng.random(n) < p, 1.0 / p, 0.0)
    return w, (rng.random(n) < value).astype(np.float64)


@pytest.mark.slow
def test_betting_interval_holds_a_value_the_bootstrap_misses() -> None:
    """About four heavily weighted events of 2,000: the betting interval holds the value in
    at least 95 of 100 logs (its guarantee; it held it in 99), the bootstrap's in fewer
    than 85 (it held it in 68)."""
    held = bootstrap = 0
    for seed in range(100):
        w, f = heavy_log(seed, p=0.002)
        low, high = betting_interval(w, f)
        held += low <= 0.3 <= high
        ips = evaluate_weights(np.ones((len(w), 1)), f, w, n_boot=100, seed=seed).ips
        bootstrap += ips.ci_low <= 0.3 <= ips.ci_high
    assert held >= 95 and bootstrap < 85, (held, bootstrap)


def test_betting_interval_narrows_with_the_events() -> None:
    w = np.ones(20_000)
    f = (np.random.default_rng(1).random(20_000) < 0.3).astype(np.float64)
    low, high = betting_interval(w, f)
    assert low < 0.3 < high and high - low < 0.04
    assert betting_interval(w[:0], f[:0]) == (0.0, 1.0)


def test_a_corrected_interval_maps_through_h_over_the_rates_corners() -> None:
    assert corrected_interval(0.2, 0.5, None) == (0.2, 0.5)
    low, high = corrected_interval(0.2, 0.5, SlotRates.scalar(0.1, 0.2))
    assert (low, high) == pytest.approx((0.1 / 0.7, 0.4 / 0.7))
    wide = corrected_interval(0.2, 0.5, SlotRates.scalar(0.1, 0.2, 0.01, 0.02))
    assert wide[0] < low and wide[1] > high
    # a slot examined 0.6 of the time, trusted less: (f - 0.6 0.1) / (0.6 (1 - 0.1 - 0.2))
    slot = SlotRates((0.6,), (0.1,), 0.2, (0.0,), (0.0,))
    assert corrected_interval(0.2, 0.5, slot) == pytest.approx((0.14 / 0.42, 0.44 / 0.42))
    assert corrected_interval(0.2, 0.5, SlotRates((0.6,), (0.1,), 0.2, (0.05,), (0.0,)))[1] \
        > 0.44 / 0.42


def test_few_effective_events_are_flagged_and_their_intervals_widened() -> None:
    w, f = heavy_log(3)
    result = evaluate_weights(np.ones((len(w), 1)), f, w, n_boot=50).to_dict()
    assert result["ess"] < MIN_ESS
    guarded = guard_heavy_tails(result, w, f)
    low, high = betting_interval(w, f)
    assert guarded["insufficient_data"] is True and "effective sample size" in guarded["reason"]
    for name in ("ips", "snips", "dr"):
        assert guarded[name]["value"] == result[name]["value"]
        assert guarded[name]["ci_low"] <= min(low, result[name]["ci_low"])
        assert guarded[name]["ci_high"] >= max(high, result[name]["ci_high"])
    many = evaluate_weights(np.ones((2_000, 1)), f, np.ones(2_000), n_boot=50).to_dict()
    assert guard_heavy_tails(many, np.ones(2_000), f) == many
