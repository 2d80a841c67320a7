"""RIPS and SNRIPS on simulated cascade slate logs whose true values are known exactly.

A user reads a slate of ``L`` distinct items top down and clicks the first
item that attracts them (probability ``ATTRACT[c, item]``), then stops: the
cascade model, where a slot's reward depends on the items above it.  Slates
are drawn by Plackett-Luce policies (items drawn one slot at a time without
replacement, in proportion to ``exp(score)``), so every slate's probability,
and a policy's value ``E[sum_k r_k] = E[1 - prod_k (1 - ATTRACT[c, a_k])]``,
is computed exactly by enumerating the slates.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.simulate import (
    ALL_SLATES,
    ITEMS,
    PL_LOGGING_SCORES,
    PL_TARGET_SCORES,
    SLOTS,
    UNIFORM_SCORES,
    cascade_probabilities,
    independent_weights,
    simulate_slates,
    slate_value,
)
from app.evaluation.slates import (
    SLATE_ESTIMATORS,
    SlateEvaluation,
    evaluate_slates,
    uniform_cascade,
)

SLATES_PER_LOG, SEEDS, N_BOOT = 4_000, 40, 1_000
TARGET_SCORES, LOGGING_SCORES = PL_TARGET_SCORES, PL_LOGGING_SCORES


def true_value(scores: np.ndarray | None) -> float:
    """Exact value of a Plackett-Luce policy (``None``: uniform) over uniform contexts."""
    return slate_value(UNIFORM_SCORES if scores is None else scores)


def simulate(seed: int, rho0: float = 0.0, rho1: float = 0.0
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Clicks, logging cascade propensities, the slates and their contexts."""
    return simulate_slates(seed, LOGGING_SCORES, SLATES_PER_LOG, rho0, rho1)


def coverage(results: list[SlateEvaluation], estimator: str, truth: float) -> float:
    return float(np.mean([r.to_dict()[estimator]["ci_low"] <= truth
                          <= r.to_dict()[estimator]["ci_high"] for r in results]))


def independent_ips(clicks: np.ndarray, slates: np.ndarray, c: np.ndarray) -> float:
    """Per-slot independent IPS with the exact item-at-slot marginals of both policies."""
    w = independent_weights(slates, c, LOGGING_SCORES, TARGET_SCORES)
    return float((w * clicks).sum(axis=1).mean())


def test_the_cascade_probabilities_are_a_distribution() -> None:
    p = cascade_probabilities(np.tile(LOGGING_SCORES[0], (len(ALL_SLATES), 1)), ALL_SLATES)
    assert p[:, -1].sum() == pytest.approx(1.0)
    uniform = uniform_cascade(2, SLOTS, ITEMS)
    assert uniform[0].tolist() == pytest.approx([1 / 5, 1 / 20, 1 / 60])


@pytest.mark.slow
@pytest.mark.parametrize("target", ["pl", "uniform", "logging"])
def test_rips_is_unbiased_and_covers_under_the_cascade(target: str) -> None:
    scores = {"pl": TARGET_SCORES, "uniform": None, "logging": LOGGING_SCORES}[target]
    truth = true_value(scores)
    results = []
    for seed in range(SEEDS):
        clicks, logging, slates, c = simulate(seed)
        pi = (None if target == "logging"
              else uniform_cascade(len(c), SLOTS, ITEMS) if target == "uniform"
              else cascade_probabilities(TARGET_SCORES[c], slates))
        results.append(evaluate_slates(clicks, logging, pi, n_boot=N_BOOT, seed=seed))
    for estimator in SLATE_ESTIMATORS:
        values = np.array([r.to_dict()[estimator]["value"] for r in results])
        se = values.std() / np.sqrt(SEEDS)
        assert abs(values.mean() - truth) < 4 * se, (estimator, values.mean(), truth)
        assert coverage(results, estimator, truth) >= 0.88, estimator


def test_independent_ips_is_biased_where_rips_is_not() -> None:
    """Why the variant exists: the item-at-slot weight ignores the items above a slot."""
    truth = true_value(TARGET_SCORES)
    independent, interaction = [], []
    for seed in range(SEEDS):
        clicks, logging, slates, c = simulate(seed)
        independent.append(independent_ips(clicks, slates, c))
        pi = cascade_probabilities(TARGET_SCORES[c], slates)
        interaction.append(evaluate_slates(clicks, logging, pi, n_boot=10).rips.value)
    iips, rips = np.array(independent), np.array(interaction)
    assert abs(rips.mean() - truth) < 4 * rips.std() / np.sqrt(SEEDS)
    assert abs(iips.mean() - truth) > 8 * iips.std() / np.sqrt(SEEDS)


@pytest.mark.slow
def test_noisy_clicks_corrected_per_slot() -> None:
    rho0, rho1 = 0.03, 0.25
    truth = true_value(TARGET_SCORES)
    results = []
    for seed in range(SEEDS):
        clicks, logging, slates, c = simulate(seed, rho0, rho1)
        pi = cascade_probabilities(TARGET_SCORES[c], slates)
        results.append(evaluate_slates(clicks, logging, pi, rho0, rho1, n_boot=N_BOOT,
                                       seed=seed))
    for estimator in SLATE_ESTIMATORS:
        values = np.array([r.to_dict()[estimator]["value"] for r in results])
        assert abs(values.mean() - truth) < 4 * values.std() / np.sqrt(SEEDS), estimator
        assert coverage(results, estimator, truth) >= 0.88, estimator
    assert results[0].correction["rho1"] == rho1


def test_bad_slate_input_is_refused() -> None:
    clicks, logging, _, _ = simulate(0)
    with pytest.raises(ValueError, match="cascade propensities"):
        evaluate_slates(clicks, np.zeros_like(logging), None)
    with pytest.raises(ValueError, match="target must be"):
        evaluate_slates(clicks, logging, np.ones((3, SLOTS)))
    with pytest.raises(ValueError, match="slots need"):
        uniform_cascade(1, 6, ITEMS)
