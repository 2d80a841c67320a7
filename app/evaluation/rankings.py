"""Off-policy values of ranking policies on a rank model's decision log.

A *rank* log holds per logged ranking (one event) ``i``: the context
``x_i``, the number of candidates the request offered, ``n_i``, the slots
shown, ``m_i``, and per shown slot ``k``: the logging policy's probability
of that placement given the items placed above it, ``mu_ik`` (a slot's
``propensity`` in the log), and the observed click ``f_ik``.

A target policy is given the same way: ``pi_ik``, its probability of
placing the logged item in slot ``k`` given the logged items above it.  A
uniformly random ranking of the request's own candidates has
``pi_ik = 1 / (n_i - k)`` (:func:`uniform_placements`).  The weight of slot
``k`` is the cascade weight ``w_ik = prod_{j <= k} pi_ij / mu_ij``, the
ratio of the probabilities of the ranking's first ``k + 1`` placements
(McInerney et al. 2020, reward-interaction IPS): it is unbiased for slot
``k``'s value whenever a slot's click depends on the items at and above it
only (the cascade assumption, which the position-based model satisfies).
:func:`evaluate_ranking` gives

* the value of a ranking's first slot (slot 0 is always examined; its click
  is the reward of a ranking everywhere in the service: challengers,
  apprentice mode), IPS, SNIPS and DR with ``n`` = the events
  (:func:`app.evaluation.estimators.evaluate_weights`);
* ``positions``: the same for each slot ``k``, on the events that showed
  a slot ``k`` (``n`` = the impressions of slot ``k``);
* ``slot_impressions``: the shown slots of all events;
* ``slates`` (when every event showed as many slots): RIPS and SNRIPS of
  the expected clicks per ranking (:mod:`app.evaluation.slates`).

With click-noise rates, slot ``k``'s clicks are corrected by slot ``k``'s
rates: with per-slot rates (examination ``theta_k`` and trust bias
``rho0_k``, :class:`app.evaluation.rates.SlotRates`) each position's value is
the corrected relevance of what the target places there, and the slates'
the expected relevant items per ranking; scalar ``rho0, rho1`` are the rates
of every slot with ``theta = 1``.

The logging policy is the target with ``pi = mu`` (weights 1).  Pure numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.evaluation.estimators import evaluate_weights
from app.evaluation.heavy_tails import guard_heavy_tails
from app.evaluation.rates import SlotRates, noise_rates
from app.evaluation.slates import evaluate_slates

#: The policies a rank log is evaluated for (a model's policy would need every candidate's
#: features, which the log keeps only while the model has challengers).
RANK_POLICIES = ("uniform", "logging")


@dataclass(frozen=True)
class RankLog:
    """A logged ranking per event (module docstring); slots beyond an event's shown ones
    hold click 0 and propensity 1."""

    X: np.ndarray
    """``n x d`` contexts."""
    clicks: np.ndarray
    """``n x L`` observed clicks ``f_ik``."""
    propensities: np.ndarray
    """``n x L`` placement probabilities ``mu_ik`` given the slots above."""
    shown: np.ndarray
    """``n`` slots shown ``m_i``."""
    candidates: np.ndarray
    """``n`` candidates offered ``n_i`` (0: not logged, by a version before it was)."""

    def __post_init__(self) -> None:
        n = len(self.shown)
        if n == 0:
            raise ValueError("the log has no events")
        if self.X.ndim != 2 or self.X.shape[0] != n or self.clicks.shape != \
                self.propensities.shape or self.clicks.shape[0] != n or len(self.candidates) != n:
            raise ValueError("X, clicks, propensities, shown and candidates must have one row "
                             "per event")
        if self.shown.min() < 1 or self.shown.max() > self.clicks.shape[1]:
            raise ValueError("every event shows 1 to L slots")
        if not np.all((self.propensities > 0) & (self.propensities <= 1)):
            raise ValueError("propensities must lie in (0, 1]")
        known = self.candidates > 0
        if np.any(self.candidates[known] < self.shown[known]):
            raise ValueError("an event shows more slots than it had candidates")

    @property
    def n(self) -> int:
        return len(self.shown)

    @property
    def slots(self) -> int:
        return int(self.clicks.shape[1])

    def shown_mask(self) -> np.ndarray:
        """``n x L``: whether event ``i`` showed slot ``k``."""
        mask: np.ndarray = np.arange(self.slots) < self.shown[:, None]
        return mask


def uniform_placements(log: RankLog) -> np.ndarray:
    """``n x L`` placement probabilities of a uniformly random ranking of each request's
    candidates, ``1 / (n_i - k)`` (1 beyond the shown slots); ValueError when some events
    were logged without their candidate count."""
    unknown = int(np.count_nonzero(log.candidates == 0))
    if unknown:
        raise ValueError(f"{unknown} of the {log.n} rankings were logged without their number "
                         "of candidates (by a version before it was logged): evaluate a window "
                         "of events logged after them (since)")
    left = log.candidates[:, None] - np.arange(log.slots)
    out: np.ndarray = np.where(log.shown_mask(), 1.0 / np.maximum(left, 1), 1.0)
    return out


def placements(log: RankLog, policy: object) -> np.ndarray | None:
    """A policy of :data:`RANK_POLICIES` as placement probabilities (None: the logging
    policy); ValueError naming the supported ones otherwise."""
    if policy not in RANK_POLICIES:
        raise ValueError(f"a rank log is evaluated for the policies {', '.join(RANK_POLICIES)}"
                         f", not {policy!r}")
    return uniform_placements(log) if policy == "uniform" else None


def bootstrap_runs(log: RankLog) -> int:
    """Bootstrap runs of :func:`evaluate_ranking` (for a progress bar, in resamples each)."""
    return 1 + int(log.shown.max()) + int(_same_slots(log))


def _same_slots(log: RankLog) -> bool:
    return bool(np.all(log.shown == log.shown[0]))


def evaluate_ranking(log: RankLog, target: np.ndarray | None, rho0: float | None = None,
                     rho1: float | None = None, rho0_se: float = 0.0, rho1_se: float = 0.0,
                     n_boot: int = 200, seed: int = 0,
                     progress: Callable[[int], None] | None = None,
                     rates: SlotRates | None = None) -> dict[str, Any]:
    """The result of ``target`` (``n x L`` placement probabilities, None for the logging
    policy) on ``log`` (module docstring): slot 0's IPS, SNIPS and DR with ``n`` events,
    ``slot_impressions``, ``positions`` and, when every event showed as many slots,
    ``slates``; corrected by ``rates`` (per slot) or ``rho0, rho1`` (every slot alike)."""
    used = noise_rates(rho0, rho1, rho0_se, rho1_se, rates)
    used = None if used is None else used.for_slots(int(log.shown.max()))
    mask = log.shown_mask()
    if target is None:
        ratio = np.ones_like(log.propensities)
    elif target.shape != log.propensities.shape:
        raise ValueError(f"target must be {log.propensities.shape}, got {target.shape}")
    else:
        ratio = np.where(mask, target / log.propensities, 1.0)
    w = np.cumprod(ratio, axis=1)

    def slot(k: int, rows: np.ndarray) -> dict[str, Any]:
        rates_k = None if used is None else used.slot(k)
        result = evaluate_weights(log.X[rows], log.clicks[rows, k], w[rows, k],
                                  n_boot=n_boot, seed=seed, progress=progress,
                                  rates=rates_k).to_dict()
        return guard_heavy_tails(result, w[rows, k], log.clicks[rows, k], rates=rates_k)

    result = slot(0, np.ones(log.n, dtype=bool))
    if used is not None:
        result["correction"] = used.correction()  # every slot's, not slot 0's alone
    result["slot_impressions"] = int(log.shown.sum())
    result["positions"] = [{"position": k, **slot(k, mask[:, k])}
                           for k in range(int(log.shown.max()))]
    if _same_slots(log):
        m = int(log.shown[0])
        logging = np.cumprod(log.propensities[:, :m], axis=1)
        cascade = None if target is None else logging * w[:, :m]
        slates = evaluate_slates(log.clicks[:, :m], logging, cascade, n_boot=n_boot,
                                 seed=seed, progress=progress, rates=used).to_dict()
        del slates["correction"]  # the same as the result's
        result["slates"] = slates
    return result
