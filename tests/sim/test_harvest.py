"""Intervention harvesting: the limits of the harvested ratios, and the cross-check of our
per-slot position bias with ``ultr-bias-toolkit``'s estimators on the same logged rankings.

The cross-check needs the ``peer`` extra (the toolkit and torch) and skips without it.
Tolerances: each comparison is ``Z`` standard deviations, ``Z`` the two-sided 95% normal
quantile with Bonferroni over the six comparisons (two slots, three estimators); our
standard deviation is our 95% interval's half-width over 1.96, the toolkit's its
bootstrap over queries (it gives none).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from app.sim.harvest import ESTIMATORS, harvest_limits, peer_check, pool_placements
from app.sim.trust import RHO1, THETA, TRUST_RHO0, Placements

#: Requests per stream (the toolkit's standard deviations are about 0.015 and 0.007, ours
#: about 0.015 and 0.02, for theta_1 and theta_2).
ROUNDS = 15_000
#: Click noise alike in every slot: the position-based model the toolkit assumes.
FLAT_RHO0 = (0.1, 0.1, 0.1)
Z = NormalDist().inv_cdf(1.0 - 0.05 / 12)
Z95 = NormalDist().inv_cdf(0.975)


def _rows(query: list[int], item: list[int], slot: list[int], relevance: list[float]
          ) -> Placements:
    n = len(slot)
    ones = np.ones(n)
    return Placements(np.array(slot), ones, ones, ones, np.array(relevance), np.arange(n),
                      np.array(query), np.array(item), np.zeros((n, 4)))


def test_harvest_limits_mix_examination_and_false_clicks_under_trust_bias() -> None:
    # (0, 0): relevant, shown in every slot; (0, 1): irrelevant, in slots 0 and 1 (twice).
    rows = _rows([0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 1],
                 [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    limits = harvest_limits(rows, THETA, TRUST_RHO0, RHO1)
    relevant = np.array(THETA) * (1.0 - RHO1)
    irrelevant = np.array(THETA) * np.array(TRUST_RHO0)
    slot1 = (relevant[1] + irrelevant[1]) / (relevant[0] + irrelevant[0])
    np.testing.assert_allclose(limits["pivot"], [1.0, slot1, THETA[2]])
    np.testing.assert_allclose(limits["adjacent_chain"],
                               [1.0, slot1, slot1 * relevant[2] / relevant[1]])
    flat = harvest_limits(rows, THETA, FLAT_RHO0, RHO1)
    for name in ESTIMATORS:
        np.testing.assert_allclose(flat[name], THETA, atol=1e-4)


def _sd(interval: np.ndarray) -> np.ndarray:
    """Our standard deviation per slot from its 95% interval."""
    return (interval[:, 1] - interval[:, 0]) / (2.0 * Z95)


@pytest.mark.slow
def test_toolkit_agrees_with_ours_without_trust_bias() -> None:
    pytest.importorskip("ultr_bias_toolkit")
    check = peer_check(pool_placements(0, FLAT_RHO0, ROUNDS), THETA, FLAT_RHO0, RHO1)
    ours, sd_ours = check.ours.theta, _sd(check.ours.theta_interval)
    tolerance = Z * np.sqrt(sd_ours[1:] ** 2 + check.sd[:, 1:] ** 2)
    assert np.all(np.abs(check.toolkit[:, 1:] - ours[1:]) <= tolerance)
    # and the toolkit holds the truth within its own spread
    assert np.all(np.abs(check.toolkit[:, 1:] - THETA[1:]) <= Z * check.sd[:, 1:])


@pytest.mark.slow
def test_toolkit_lands_on_the_harvest_limit_under_trust_bias() -> None:
    pytest.importorskip("ultr_bias_toolkit")
    check = peer_check(pool_placements(0, TRUST_RHO0, ROUNDS), THETA, TRUST_RHO0, RHO1)
    # The harvested ratios converge below the truth (false clicks fall with the slot) ...
    assert np.all(check.limits[:, 1:] < np.array(THETA[1:]))
    # ... and the toolkit lands there (ours models rho0_k: docs/results/rank.md).
    assert np.all(np.abs(check.toolkit[:, 1:] - check.limits[:, 1:]) <= Z * check.sd[:, 1:])
