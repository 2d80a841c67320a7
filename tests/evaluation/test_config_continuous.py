"""A configuration's smoothed IPS, SNIPS and DR on a continuous log hold the true value of
the policy it trains (:mod:`app.evaluation.configrun` with the continuous task's shape).

Each of :data:`SEEDS` logs of the pricing world (a logging policy smoothed around a
context's best price plus :data:`LOG_SHIFT`) is evaluated for ``config:`` of a ``ridge_ucb``
configuration: the learner learns the first half of the log off-policy, its greedy price
smoothed with its own bandwidth is scored on the second half.  The truth is that policy's
on-policy value, simulated: the same learner trained here on the same events by the
learner's own calls (decide for a batch's contexts, learn the batch with the logged play),
then its window averaged over the revenue curve of fresh customers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import pytest

from app.evaluation.configrun import ConfigPlan, evaluate_config
from app.evaluation.estimators import Options
from app.evaluation.shapes import ConfigShape
from app.evaluation.training import BATCH
from app.learners.base import Learner
from app.learners.registry import build, learner_class
from app.learners.smoothing import ContinuousBandit, draw_smoothed, smoothed_pdf, window
from app.tasks import get_task
from app.tasks.continuous import ContinuousLog
from tests.evaluation.test_smoothed import HI, LO, TRUTH_POINTS, WORLD

SHAPE = cast(ConfigShape, get_task("continuous").log_shape)
CONFIG: dict[str, Any] = {"algorithm": "ridge_ucb", "params": {"bandwidth": 1.0}}
#: The logging policy: smoothed around a context's best price plus 0.5, half-width 1.5, a
#: fifth of the actions uniform (overlapping the trained policy's windows enough that the
#: effective sample size of the 5,000 evaluated events stays above 300, where the normal
#: intervals are trusted; with ``test_smoothed``'s farther logging policy it fell to 80).
LOG_SHIFT, LOG_H, LOG_EPSILON = 0.5, 1.5, 0.2
N = 10_000
#: Seeds and how many intervals of each estimator must hold the truth (90% of 20).
SEEDS, COVERED = 20, 18
#: Fresh customers the true value is averaged over (its Monte Carlo error is about
#: 0.6 / sqrt(100,000) = 0.002, a tenth of the intervals' half-widths).
TRUTH_CONTEXTS = 100_000
FRACTION = 0.5


def continuous_log(seed: int) -> ContinuousLog:
    """One log of :data:`N` customers of the logging policy: purchases drawn, revenue as
    the reward."""
    rng = np.random.default_rng(seed)
    X = WORLD.customers(N, rng)
    centre = np.clip(WORLD.best_prices(X) + LOG_SHIFT, LO, HI)
    actions = draw_smoothed(rng.random((N, 2)), centre, LO, HI, LOG_H, LOG_EPSILON)
    pdf = smoothed_pdf(actions, centre, LO, HI, LOG_H, LOG_EPSILON)
    reward = actions * WORLD.purchases(X, actions, rng)
    return ContinuousLog(X, actions, pdf, reward, np.full(N, np.nan), (LO, HI))


def trained(log: ContinuousLog, seed: int) -> ContinuousBandit:
    """The configuration's learner after the log's first half, by its own calls."""
    params = {**learner_class("continuous", CONFIG["algorithm"]).service_defaults,
              **CONFIG["params"], "action_range": [LO, HI]}
    learner: Learner = build("continuous", CONFIG["algorithm"], WORLD.n_features, None,
                             params, seed=seed)
    train = round(log.n * FRACTION)
    for start in range(0, train, BATCH):
        rows = slice(start, min(start + BATCH, train))
        own = learner.decide_contexts(log.X[rows])
        learner.learn_many({"x": own["x"], "greedy": own["greedy"], "action": log.actions[rows],
                            "pdf": log.pdf[rows], "reward": log.reward[rows],
                            "click_value": log.click_value[rows]})
    return cast(ContinuousBandit, learner)


def true_value(learner: ContinuousBandit) -> float:
    """``E_x[(1/|W|) int_W revenue(x, a) da]`` for the learner's greedy price's window
    (midpoint rule over :data:`TRUTH_POINTS` points)."""
    X = WORLD.customers(TRUTH_CONTEXTS, np.random.default_rng(12345))
    greedy = learner.decide_contexts(X, explore=False)["greedy"]
    a, b = window(np.asarray(greedy), LO, HI, learner.half_width)
    u = (np.arange(TRUTH_POINTS) + 0.5) / TRUTH_POINTS
    return float(WORLD.revenue(X, a[:, None] + u[None, :] * (b - a)[:, None]).mean())


def evaluated(log: ContinuousLog, seed: int, size: int = 1_700) -> dict[str, Any]:
    """``config:`` of :data:`CONFIG` on ``log`` read in batches of ``size`` events (a size
    that cuts the learning steps)."""
    def batches() -> Iterator[tuple[ContinuousLog, tuple[str, ...]]]:
        for start in range(0, log.n, size):
            part = log.rows(slice(start, start + size))
            yield part, tuple(f"{i}-0" for i in range(start, start + part.n))

    plan = ConfigPlan.of(CONFIG, "continuous", None, Options(seed=seed), log.n, FRACTION,
                         shape=SHAPE, inherited={"action_range": [LO, HI]})
    return evaluate_config(plan, batches)


def coverage(seeds: int = SEEDS) -> dict[str, Any]:
    """Over ``seeds`` logs: how many of IPS's, SNIPS's and DR's intervals hold the trained
    policy's true value, their mean widths, the least effective sample size, the seeds
    flagged ``low_ess`` and the truths (``bench/results_config_continuous.py`` writes the
    table of ``docs/continuous.md``)."""
    covered = {"ips": 0, "snips": 0, "dr": 0}
    widths = {name: 0.0 for name in covered}
    flagged: list[int] = []
    truths: list[float] = []
    least_ess = np.inf
    for seed in range(seeds):
        log = continuous_log(seed)
        truth = true_value(trained(log, seed))
        result = evaluated(log, seed)
        assert result["split"]["evaluate"]["events"] == log.n - round(log.n * FRACTION)
        flagged += [seed] if result["low_ess"] else []
        least_ess = min(least_ess, result["ess"])
        truths.append(truth)
        for name in covered:
            low, high = result[name]["ci"]
            covered[name] += low <= truth <= high
            widths[name] += (high - low) / seeds
    return {"config": CONFIG, "seeds": seeds, "covered": covered, "widths": widths,
            "least_ess": least_ess, "flagged": flagged, "truths": truths}


@pytest.mark.slow
def test_config_intervals_cover_the_trained_policys_true_value() -> None:
    """IPS, SNIPS and DR each hold the truth in at least 18 of 20 logs, none flagged."""
    run = coverage()
    assert len(run["truths"]) == SEEDS  # every seed was checked
    assert all(count >= COVERED for count in run["covered"].values()), run
    assert not run["flagged"], run


def test_config_equals_its_policy_scored_as_a_model() -> None:
    """The numbers are the shape's ``model`` scoring of the trained learner on the
    evaluated half (the same estimators, keyed by place among the evaluated events),
    whatever the batches."""
    from app.evaluation.smoothed import smoothed_evaluation

    log = continuous_log(0)
    learner = trained(log, 0)
    test = log.rows(slice(round(log.n * FRACTION), None))
    windows = SHAPE.trained(learner)(test)
    expected = smoothed_evaluation(test.X, test.actions, test.pdf, test.reward, windows,
                                   (LO, HI), seed=0)
    for size in (1_700, log.n):
        result = evaluated(log, 0, size)
        for name in ("ips", "snips", "dr"):
            assert result[name]["value"] == pytest.approx(getattr(expected, name).value,
                                                          rel=1e-9), (name, size)
        assert result["split"]["train"]["stream_ids"] == ["0-0", f"{round(log.n / 2) - 1}-0"]
