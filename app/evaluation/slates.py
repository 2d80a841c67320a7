"""Reward-interaction IPS for slates: a slot's reward weighted by the slots above it.

A *slate* log holds, per slate ``i`` and slot ``k = 0 .. L - 1``: the
observed reward (click) ``f_ik`` at slot ``k`` and the logging policy's
*cascade* propensity ``mu_ik = mu(a_i0, ..., a_ik | x_i)``, the probability
of the slate's first ``k + 1`` items (the product of the per-slot
probabilities ``mu(a_ij | x_i, a_i0 .. a_i(j-1))`` for ``j <= k``; Open
Bandit Pipeline's ``pscore_cascade``).  With the target policy's cascade
probabilities ``pi_ik``, the weight of slot ``k`` is
``w_ik = pi_ik / mu_ik``, the product of the importance weights of slots
``0 .. k``, and the value of a policy is the expected sum of the rewards
of a slate's slots,

* RIPS (reward-interaction IPS, McInerney et al. 2020, "Counterfactual
  Evaluation of Slate Recommendations with Sequential Reward
  Interactions"; Open Bandit Pipeline's ``SlateRewardInteractionIPS``):
  ``V_RIPS = (1/n) sum_i sum_k w_ik r_ik``, unbiased when a slot's reward
  depends only on the items at and above it (the cascade assumption: a
  user reads down the slate), which per-slot independent IPS is not: its
  weight ignores the items above;
* SNRIPS (``SelfNormalizedSlateRewardInteractionIPS``): each slot
  normalised by its own mean weight,
  ``V_SNRIPS = sum_k (sum_i w_ik r_ik / sum_i w_ik)``; consistent.

``r_ik`` is ``f_ik`` or, with click-noise rates, ``h(f_ik)`` (with per-slot
rates, slot ``k``'s correction ``(f_ik - beta_k) / alpha_k``:
:mod:`app.evaluation.rates`), with uncertain rates drawn per resample, all as
in :mod:`app.evaluation.estimators`: a resample's drawn rates map slot
``k``'s sum as ``a_kb sum_i w_ik r_ik + c_kb sum_i w_ik``.

**Streaming.**  Both are functions of the column sums ``n``, ``sum_i w_ik r_ik``
and ``sum_i w_ik`` per slot, which :class:`SlateSums` keeps as a mergeable
accumulator, in total and per hashed bucket of slates
(:class:`app.evaluation.sums.TermSums`); the interval is the percentile
bootstrap over the buckets, each resample divided by its own number of
slates.  :func:`evaluate_slates` is that accumulator over one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.evaluation.estimators import Estimate, Options
from app.evaluation.rates import SlotRates
from app.evaluation.sums import TermSums, row_hash, row_keys

SLATE_ESTIMATORS = ("rips", "snrips")


@dataclass(frozen=True)
class SlateEvaluation:
    """RIPS and SNRIPS of one target policy on one slate log."""

    rips: Estimate
    snrips: Estimate
    n_slates: int
    slots: int
    correction: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The ``slates`` field of ``noisyloop evaluate``'s JSON."""
        return {"rips": self.rips.to_dict(), "snrips": self.snrips.to_dict(),
                "n_slates": self.n_slates, "slots": self.slots,
                "correction": self.correction}


def uniform_cascade(n_slates: int, slots: int, n_items: int) -> np.ndarray:
    """Cascade probabilities of a uniformly random slate of distinct items,
    ``prod_{j <= k} 1 / (n_items - j)`` for every slate (``n_slates x slots``)."""
    if slots > n_items:
        raise ValueError(f"{slots} slots need at least as many items, got {n_items}")
    per_slot = 1.0 / (n_items - np.arange(slots))
    return np.tile(np.cumprod(per_slot), (n_slates, 1))


def _statistics(sums: np.ndarray, slots: int) -> np.ndarray:
    """RIPS, SNRIPS from rows of sums ``[n, sum w_k r_k for k, sum w_k for k]`` (NaN for a
    resample without slates)."""
    n, u, w = sums[:, 0], sums[:, 1:1 + slots], sums[:, 1 + slots:]
    with np.errstate(invalid="ignore", divide="ignore"):
        per_slot = np.where(w > 0, u / np.where(w > 0, w, 1.0), 0.0)
        return np.stack([u.sum(axis=1) / n, per_slot.sum(axis=1)], axis=-1)


@dataclass
class SlateSums:
    """The mergeable accumulator of RIPS and SNRIPS (module docstring): per slate ``1``, then
    ``w_k r_k`` and ``w_k`` for each of the ``slots`` slots."""

    sums: TermSums
    slots: int

    @classmethod
    def zeros(cls, slots: int) -> SlateSums:
        return cls(TermSums.zeros(1 + 2 * slots), slots)

    @classmethod
    def of_slots(cls, n: TermSums, wr: list[TermSums], w: list[TermSums]) -> SlateSums:
        """The sums from per-slot sums of the same slates (the slate count ``n``, and each
        slot's ``sum w_k r_k`` and ``sum w_k``, one column each)."""
        columns = [n, *wr, *w]
        return cls(TermSums(np.hstack([c.totals for c in columns]),
                            np.hstack([c.buckets for c in columns])), len(wr))

    def add(self, w: np.ndarray, r: np.ndarray, hashes: np.ndarray) -> None:
        """Add slates by their ``n x slots`` cascade weights and rewards and their hashes."""
        self.sums.add(np.hstack([np.ones((len(w), 1)), w * r, w]), hashes)

    def merge(self, other: SlateSums) -> None:
        self.sums.merge(other.sums)

    def evaluation(self, options: Options, progress: Callable[[int], None] | None = None
                   ) -> SlateEvaluation:
        """RIPS and SNRIPS with their intervals (module docstring)."""
        correction = options.correction()
        slots = self.slots
        n = int(self.sums.totals[0])
        if n == 0:
            raise ValueError("the log has no slates")
        point = _statistics(self.sums.totals[None, :], slots)[0]
        rng = np.random.default_rng(options.seed)
        sums = self.sums.resampled(options.n_boot, rng, progress)
        rates = options.rates()
        spread = None if rates is None else rates.resampling(options.n_boot, rng)
        if spread is not None:  # slot k's sum of w r_b: a_kb sum w r + c_kb sum w
            scale, shift = spread
            weights = sums[:, 1 + slots:]
            sums = np.hstack([sums[:, :1], scale * sums[:, 1:1 + slots] + shift * weights,
                              weights])
        replicates = _statistics(sums, slots)
        level = options.level
        quantiles = np.nanquantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
        rips, snrips = (Estimate(float(point[j]), float(quantiles[0, j]),
                                 float(quantiles[1, j])) for j in range(2))
        return SlateEvaluation(rips=rips, snrips=snrips, n_slates=n, slots=slots,
                               correction=correction)


def evaluate_slates(rewards: np.ndarray, logging: np.ndarray, target: np.ndarray | None,
                    rho0: float | None = None, rho1: float | None = None,
                    rho0_se: float = 0.0, rho1_se: float = 0.0, n_boot: int = 200,
                    level: float = 0.95, seed: int = 0,
                    progress: Callable[[int], None] | None = None,
                    rates: SlotRates | None = None) -> SlateEvaluation:
    """RIPS and SNRIPS (module docstring) of ``target`` on a slate log: the accumulator over
    one batch, the slates keyed ``0 .. n - 1``.

    ``rewards`` and ``logging`` are ``n x L`` (clicks and the logging policy's cascade
    propensities); ``target`` the target's cascade probabilities, ``n x L``, or ``None``
    for the logging policy (weight 1).  The other arguments as in
    :func:`app.evaluation.estimators.evaluate`; ``rates``: per-slot rates in place of
    ``rho0`` and ``rho1``.
    """
    if rewards.ndim != 2 or rewards.shape[0] == 0 or logging.shape != rewards.shape:
        raise ValueError("rewards and logging propensities must be n x L with n > 0")
    if not np.all((logging > 0) & (logging <= 1)):
        raise ValueError("cascade propensities must lie in (0, 1]")
    n, slots = rewards.shape
    if target is None:
        w = np.ones_like(logging, dtype=np.float64)
    elif target.shape != rewards.shape:
        raise ValueError(f"target must be {n} x {slots}, got {target.shape}")
    else:
        w = target / logging
    options = Options(rho0, rho1, rho0_se, rho1_se, n_boot, level, seed, slot_rates=rates)
    used = options.rates()
    options = options.with_rates(None if used is None else used.for_slots(slots))
    sums = SlateSums.zeros(slots)
    sums.add(w, options.reward(rewards)[0], row_hash(row_keys(np.arange(n)), seed))
    return sums.evaluation(options, progress)
