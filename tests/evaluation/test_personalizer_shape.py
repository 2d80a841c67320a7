"""The choices made on a Personalizer evaluation's results (:mod:`app.evaluation.personalizer`):
the reported ``optimalPolicy`` and auto-optimization's switch rule; the v1.0 windows, their
interval checked against simulated truth."""

from __future__ import annotations

from typing import Any

import pytest

from app.evaluation.estimators import evaluate
from app.evaluation.personalizer import optimal_policy, policy_results, switch_to, window
from app.evaluation.simulate import LABEL_LOGGING
from tests.evaluation.test_estimators import SEEDS, TARGETS, simulate, true_value


def _entry(name: str, source: str, low: float, high: float,
           insufficient: bool = False) -> dict[str, Any]:
    return {"name": name, "policySource": source,
            "summary": {"expectedReward": None if insufficient else (low + high) / 2,
                        "confidenceInterval": [low, high]}}


def test_a_switch_needs_an_interval_wholly_above_the_online_ones() -> None:
    online = _entry("Online Policy", "Online", 0.40, 0.50)
    random = _entry("Random Policy", "Random", 0.60, 0.70)  # never a candidate
    touching = _entry("exploration-0.1", "OfflineExperimentation", 0.50, 0.70)
    assert switch_to([online, random, touching]) is None  # a shared bound is no separation
    above = _entry("exploration-0.05", "OfflineExperimentation", 0.51, 0.60)
    higher = _entry("exploration-0.02", "OfflineExperimentation", 0.55, 0.90)
    chosen = switch_to([online, random, touching, above, higher])
    assert chosen is not None and chosen["name"] == "exploration-0.02"  # highest lower bound
    assert switch_to([random, above]) is None  # no online value: nothing to beat


def test_a_flagged_estimate_counts_with_its_widened_interval() -> None:
    online = _entry("Online Policy", "Online", 0.40, 0.50)
    flagged = _entry("custom", "Custom", 0.55, 0.95, insufficient=True)
    assert switch_to([online, flagged])["name"] == "custom"  # type: ignore[index]
    assert optimal_policy([online, flagged]) is None  # no point estimate to report
    plain = _entry("exploration-0.2", "OfflineExperimentation", 0.3, 0.6)
    assert optimal_policy([online, flagged, plain]) == "exploration-0.2"


def test_a_windows_confidence_interval_is_personalizers_gaussian_half_width() -> None:
    """Personalizer v1.1-preview.1's ``Evaluations_Get`` example gives, with its sums, the
    ``confidenceInterval`` and ``averageReward`` :func:`window` computes (the example's
    printed digits: 8 significant, so rel 1e-6)."""
    for (n, numerator, squares), (half, average) in (
            ((196, 2.2, 2.424), (0.015529361, 0.01122449)),
            ((1906, 22.2, 2.484), (0.0015344538, 0.011647429))):
        result = {"n": n, "totals": {"sum_wr": numerator, "sum_w": 1.0,
                                     "sum_wr_squared": squares, "nonzero_weights": 68}}
        got = window(result, "t", "PT0S")
        assert got["confidenceInterval"] == pytest.approx(half, rel=1e-6)
        assert got["averageReward"] == pytest.approx(average, rel=1e-6)
    one = window({"n": 1, "totals": {"sum_wr": 1.0, "sum_w": 1.0, "sum_wr_squared": 1.0,
                                     "nonzero_weights": 1}}, "t", "PT0S")
    assert one["confidenceInterval"] is None  # no spread from one event


def test_a_flagged_policy_keeps_its_flags_and_reason_in_policy_results() -> None:
    totals = {"sum_wr": 3.0, "sum_w": 9.0, "sum_wr_squared": 5.0, "nonzero_weights": 4}
    flagged = {"n": 10, "totals": totals, "insufficient_data": True,
               "calibration_unreliable": True, "reason": "why", "correction": {"reward": "f"}}
    record = {"startTime": "s", "endTime": "e", "content": {"value": [
        {"name": "x", "arguments": "", "policySource": "Custom", "noisyloop": flagged}]}}
    (entry,) = policy_results(record, "PT1H")
    assert (entry["insufficientData"], entry["calibrationUnreliable"], entry["reason"]) == (
        True, True, "why")
    assert entry["summary"] == [{**entry["totalSummary"], "timeStamp": "s"}]
    assert entry["totalSummary"]["snipsEstimatorDenominator"] == 9.0
    assert entry["totalSummary"]["aggregateTimeWindow"] == "PT1H"


@pytest.mark.slow
@pytest.mark.parametrize("rates", [(None, None), (0.1, 0.3)])
def test_a_windows_gaussian_interval_holds_the_true_value(
        rates: tuple[float | None, float | None]) -> None:
    """The v1.0 window's ``averageReward +- confidenceInterval`` (IPS and its Gaussian 95%
    half-width) on the estimators' simulated label logs, whose true values are exact: over
    40 seeds per logging policy and target it holds the truth in at least 90% (a 95%
    interval at 40 seeds: 36 or more hits with probability 0.86 at exact coverage, 0.99 at
    0.97, so a calibrated interval rarely fails and one below 90% coverage mostly does);
    clicks flipped at (0.1, 0.3) and corrected by the same rates."""
    rho0, rho1 = rates
    checked = 0
    for logging in ("uniform", "softmax"):
        hits = {target: 0 for target in TARGETS}
        for seed in range(SEEDS):
            log, _ = simulate(seed, LABEL_LOGGING[logging], rho0 or 0.0, rho1 or 0.0)
            for target, policy in TARGETS.items():
                result = evaluate(log, policy(log), rho0, rho1, n_boot=2, seed=seed).to_dict()
                got = window(result, "t", "PT0S")
                assert got["averageReward"] == pytest.approx(result["ips"]["value"])
                truth = true_value(target, LABEL_LOGGING[logging])
                hits[target] += abs(got["averageReward"] - truth) <= got["confidenceInterval"]
        for target, hit in hits.items():
            assert hit >= 0.9 * SEEDS, (logging, target, hit)
            checked += 1
    assert checked == 2 * len(TARGETS)
