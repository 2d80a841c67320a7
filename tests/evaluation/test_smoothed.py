"""Smoothed IPS, SNIPS and DR of continuous policies hold the true smoothed value in their 95%
intervals (:mod:`app.evaluation.smoothed`), on logs of the pricing world."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.evaluation.heavy_tails import MIN_ESS
from app.evaluation.smoothed import smoothed_evaluation, smoothed_value
from app.learners.registry import build
from app.learners.smoothing import draw_smoothed, smoothed_pdf, window
from app.sim.pricing import PricingWorld, play

WORLD = PricingWorld()
LO, HI = WORLD.price_range
#: The logging policy: smoothed around a context's best price plus 1.5, half-width 1,
#: a fifth of the actions uniform.
LOG_SHIFT, LOG_H, LOG_EPSILON = 1.5, 1.0, 0.2
#: The target policies' smoothing half-width.
H = 0.5
#: Events per log, seeds (the acceptance: at least 90% of 20 seeds covered).
N, SEEDS, COVERED = 10_000, 20, 18
#: Contexts the true value is averaged over, and points per window of its integral.
TRUTH_CONTEXTS, TRUTH_POINTS = 200_000, 101

Centre = Callable[[np.ndarray], np.ndarray]


def true_value(centre: Centre) -> float:
    """``E_x[(1/|W|) int_W revenue(x, a) da]`` (midpoint rule; its Monte Carlo error over
    200,000 contexts is about 0.6 / sqrt(200,000) = 0.0013, a tenth of the intervals'
    half-widths below)."""
    X = WORLD.customers(TRUTH_CONTEXTS, np.random.default_rng(12345))
    a, b = window(centre(X), LO, HI, H)
    u = (np.arange(TRUTH_POINTS) + 0.5) / TRUTH_POINTS
    grid = a[:, None] + u[None, :] * (b - a)[:, None]
    return float(WORLD.revenue(X, grid).mean())


def logged(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X, actions, pdf, revenue)`` of one log: purchases drawn, revenue observed."""
    rng = np.random.default_rng(seed)
    X = WORLD.customers(N, rng)
    centre = np.clip(WORLD.best_prices(X) + LOG_SHIFT, LO, HI)
    actions = draw_smoothed(rng.random((N, 2)), centre, LO, HI, LOG_H, LOG_EPSILON)
    pdf = smoothed_pdf(actions, centre, LO, HI, LOG_H, LOG_EPSILON)
    return X, actions, pdf, actions * WORLD.purchases(X, actions, rng)


def _learned() -> Centre:
    learner = build("continuous", "ridge_ucb", WORLD.n_features, None,
                    {"action_range": [LO, HI]}, seed=0)
    play(learner, WORLD, 3000, 0, batch=50)
    return lambda X: np.asarray(learner.decide_contexts(X, explore=False)["greedy"])


def coverage(policy: str, seeds: int = SEEDS) -> dict[str, Any]:
    """Over ``seeds`` logs: the true value of ``policy`` (``fixed:2.5``, or ``model``: a
    ``ridge_ucb`` learned on 3,000 customers), how many of IPS's, SNIPS's and DR's
    intervals hold it, their mean widths and the least effective sample size
    (``bench/results_smoothed.py`` writes the table of ``docs/continuous.md``)."""
    centre: Centre = ((lambda X: np.full(len(X), 2.5)) if policy == "fixed:2.5"
                      else _learned())
    truth = true_value(centre)
    covered = {"ips": 0, "snips": 0, "dr": 0}
    widths = {name: 0.0 for name in covered}
    least_ess = np.inf
    for seed in range(seeds):
        X, actions, pdf, reward = logged(seed)
        windows = np.column_stack(window(centre(X), LO, HI, H))
        est = smoothed_evaluation(X, actions, pdf, reward, windows, (LO, HI), seed=seed)
        least_ess = min(least_ess, est.ess)
        for name in covered:
            low, high = getattr(est, name).ci
            covered[name] += low <= truth <= high
            widths[name] += (high - low) / seeds
    return {"policy": policy, "truth": truth, "seeds": seeds, "covered": covered,
            "widths": widths, "least_ess": least_ess}


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fixed:2.5", "model"])
def test_intervals_cover_the_true_smoothed_value(policy: str) -> None:
    """IPS, SNIPS and DR (the reward model cross-fitted on the log) each hold the truth in
    at least 18 of 20 logs, none flagged ``low_ess``."""
    run = coverage(policy)
    assert run["least_ess"] >= MIN_ESS, run
    assert all(count >= COVERED for count in run["covered"].values()), run
    # the reward model takes most of the reward's variance out of DR's terms
    assert run["widths"]["dr"] < run["widths"]["ips"], run


def test_weights_are_the_boxcar_over_the_clipped_window() -> None:
    est = smoothed_value(np.array([0.1, 0.3, 5.0]), np.array([0.5, 0.25, 0.1]),
                         np.array([2.0, 4.0, 9.0]), np.array([0.0, 0.0, 0.0]), (LO, HI), 0.5)
    # window [0, 0.5], width 0.5: weights 1 / (0.5 * 0.5) = 4 and 1 / (0.5 * 0.25) = 8, and 0
    assert est.ips.value == pytest.approx((4 * 2.0 + 8 * 4.0) / 3)
    assert est.snips.value == pytest.approx((4 * 2.0 + 8 * 4.0) / 12)
    assert est.ess == pytest.approx(12.0**2 / (16 + 64)) and est.low_ess
