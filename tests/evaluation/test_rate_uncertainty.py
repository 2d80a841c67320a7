"""Intervals under *estimated* click-noise rates: the rates' standard errors widen them.

Each seed's log is simulated with the true rates, and the evaluation is given
rates estimated with error (the true rates plus a normal error of the stated
standard error, as an estimator with that error would report).  Treated as
exact, such rates shift every estimate and the interval misses the truth far
more often than 5%; drawn per resample, the interval holds it.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.evaluation.estimators import ESTIMATORS, Evaluation, evaluate
from app.evaluation.policies import fixed_policy, uniform_policy
from tests.evaluation.test_estimators import SEEDS, SOFTMAX, coverage, simulate, true_value

RHO0, RHO1, SE0, SE1 = 0.1, 0.3, 0.03, 0.05
N_BOOT = 1_000


def estimated_rates(seed: int) -> tuple[float, float]:
    """The rates as an estimator with standard errors :data:`SE0`, :data:`SE1` gives them."""
    error = np.random.default_rng([seed, 1]).normal(0.0, [SE0, SE1])
    return float(RHO0 + error[0]), float(RHO1 + error[1])


def runs(propagate: bool) -> list[Evaluation]:
    out = []
    for seed in range(SEEDS):
        log, _ = simulate(seed, SOFTMAX, RHO0, RHO1)
        rho0, rho1 = estimated_rates(seed)
        se0, se1 = (SE0, SE1) if propagate else (0.0, 0.0)
        out.append(evaluate(log, uniform_policy(log), rho0, rho1, se0, se1, n_boot=N_BOOT,
                            seed=seed))
    return out


@pytest.mark.slow
def test_propagated_rate_errors_restore_the_coverage() -> None:
    truth = true_value("uniform", SOFTMAX)
    plain, propagated = runs(False), runs(True)
    for estimator in ESTIMATORS:
        assert coverage(plain, estimator, truth) <= 0.75, estimator
        assert coverage(propagated, estimator, truth) >= 0.88, estimator
    for a, b in zip(plain, propagated, strict=True):
        assert a.ips.value == b.ips.value  # the point estimate uses the rates as given
        assert b.dr.ci_high - b.dr.ci_low > a.dr.ci_high - a.dr.ci_low
    assert propagated[0].correction["rate_uncertainty"]["rho1_se"] == SE1
    assert "rate_uncertainty" not in plain[0].correction


def test_zero_errors_change_nothing() -> None:
    log, _ = simulate(3, SOFTMAX, RHO0, RHO1)
    exact = evaluate(log, fixed_policy(log, 2), RHO0, RHO1)
    assert evaluate(log, fixed_policy(log, 2), RHO0, RHO1, 0.0, 0.0) == exact


def test_rate_errors_need_rates() -> None:
    log, _ = simulate(4, SOFTMAX)
    with pytest.raises(ValueError, match="need rho0 and rho1"):
        evaluate(log, None, rho0_se=0.01)
    with pytest.raises(ValueError, match=">= 0"):
        evaluate(log, None, RHO0, RHO1, rho0_se=-0.01)
