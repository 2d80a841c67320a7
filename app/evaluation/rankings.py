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
  apprentice mode), IPS, SNIPS and DR with ``n`` = the events;
* ``positions``: the same for each slot ``k``, on the events that showed
  a slot ``k`` (``n`` = the impressions of slot ``k``);
* ``slot_impressions``: the shown slots of all events;
* ``slates`` (when every event showed as many slots): RIPS and SNRIPS of
  the expected clicks per ranking (:mod:`app.evaluation.slates`).

DR's reward model for slot ``k`` is a cross-fitted ridge of the slot's
reward on the context alone, ``q_k(x_i)``, so that its direct term is
``q_k(x_i)`` for any target: DR is unbiased whatever ``q`` (Dudík, Langford
& Li 2011), and a ``q`` blind to the item gives up only part of its
variance reduction.  The logging policy is the target with ``pi = mu``
(weights 1).

With click-noise rates, slot ``k``'s clicks are corrected by slot ``k``'s
rates: with per-slot rates (examination ``theta_k`` and trust bias
``rho0_k``, :class:`app.evaluation.rates.SlotRates`) each position's value is
the corrected relevance of what the target places there, and the slates'
the expected relevant items per ranking; scalar ``rho0, rho1`` are the rates
of every slot with ``theta = 1`` (:func:`slot_options`).

**Streaming.**  Every slot's estimators are those of a label log on the
events that showed it (:class:`app.evaluation.estimators.LabelSums`, with
the slot's cascade weights), so :class:`RankSums` keeps one such mergeable
accumulator per slot, each event keyed by its position in the log, and
:class:`RankRidgeSums` the reward models' per-slot sums
(:class:`app.evaluation.reward_model.RidgeSums` with one action), fitted
on the log's first :data:`~app.evaluation.estimators.FIT_EVENTS` events:
:data:`RANK` is the rank log's :class:`app.evaluation.sums.Kind`.  The
slates' sums are the slots' (:meth:`app.evaluation.slates.SlateSums.of_slots`).
The heavy-tail guard (:mod:`app.evaluation.heavy_tails`) bets on a slot's
events in log order, so for a slot whose effective sample size falls below
:data:`~app.evaluation.heavy_tails.MIN_ESS` one more pass gathers its
weights and clicks (:func:`slot_columns`: two numbers per event of that
slot, the only per-event memory; of every slot when the result has slates,
whose intervals then widen to the sum of the slots' betting intervals).
:func:`evaluate_ranking_parts` streams a log's parts, :func:`evaluate_ranking`
is the same code over one batch.  Pure numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from app.evaluation.estimators import FIT_EVENTS, LABEL_TERMS, LabelSums, Options
from app.evaluation.heavy_tails import MIN_ESS, guard_heavy_tails, guard_slates
from app.evaluation.rates import SlotRates, correction_of
from app.evaluation.reward_model import RidgeModel, RidgeSums
from app.evaluation.slates import SlateSums
from app.evaluation.streaming import P, Policy, Reader, chain, sum_parts
from app.evaluation.sums import Kind, fold_of, row_hash, row_keys

#: The policies a rank log is evaluated for as a function of a batch (a learner's policy needs
#: every candidate's features and is replayed in order: :mod:`app.evaluation.rankreplay`).
RANK_POLICIES = ("uniform", "logging")
#: Per flagged slot, its events' cascade weights and raw clicks in log order.
SlotColumns = dict[int, tuple[np.ndarray, np.ndarray]]


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

    def rows(self, rows: np.ndarray | slice) -> RankLog:
        """The events at ``rows`` (a boolean mask, indices or a slice)."""
        return RankLog(X=self.X[rows], clicks=self.clicks[rows],
                       propensities=self.propensities[rows], shown=self.shown[rows],
                       candidates=self.candidates[rows])

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


def _check_policy(policy: object) -> None:
    if policy not in RANK_POLICIES:
        raise ValueError(f"a rank log is evaluated for the policies {', '.join(RANK_POLICIES)}"
                         f", not {policy!r}")


def placements(log: RankLog, policy: object) -> np.ndarray | None:
    """A policy of :data:`RANK_POLICIES` as placement probabilities (None: the logging
    policy); ValueError naming the supported ones otherwise."""
    _check_policy(policy)
    return uniform_placements(log) if policy == "uniform" else None


def rank_policy(policy: object) -> Callable[[RankLog], np.ndarray | None]:
    """:func:`placements` of ``policy`` as a function of a batch (picklable); ValueError
    naming the supported policies at once."""
    _check_policy(policy)
    return partial(placements, policy=policy)


def slot_options(options: Options, k: int) -> Options:
    """``options`` with the rates of slot ``k`` alone (all of them for rates of one slot);
    ValueError when per-slot rates cover fewer slots or cannot be used."""
    rates = options.rates()
    return options.with_rates(None if rates is None else rates.for_slots(k + 1).slot(k))


def slot_rewards(log: RankLog, options: Options) -> np.ndarray:
    """``n x L``: each shown slot's clicks corrected by its rates (:func:`slot_options`), 0
    beyond."""
    r = np.zeros(log.clicks.shape)
    for k in range(int(log.shown.max())):
        r[:, k] = slot_options(options, k).reward(log.clicks[:, k])[0]
    return r


def cascade_weights(log: RankLog, target: np.ndarray | None) -> np.ndarray:
    """``n x L`` cascade weights ``w_ik`` of ``target`` (placement probabilities, None for
    the logging policy) on ``log``; 1 beyond the shown slots' products."""
    if target is None:
        return np.ones_like(log.propensities)
    if target.shape != log.propensities.shape:
        raise ValueError(f"target must be {log.propensities.shape}, got {target.shape}")
    out: np.ndarray = np.cumprod(np.where(log.shown_mask(), target / log.propensities, 1.0),
                                 axis=1)
    return out


@dataclass
class RankRidgeSums:
    """Per slot, the sums of the cross-fitted ridge of the slot's reward on the context
    (module docstring)."""

    slots: list[RidgeSums]

    @classmethod
    def of(cls, log: RankLog, keys: np.ndarray, options: Options) -> RankRidgeSums:
        """The sums of the events of ``log`` (keys: their positions in the log)."""
        r = slot_rewards(log, options)
        fold = fold_of(row_hash(keys, options.seed), options.folds)
        mask = log.shown_mask()
        out = []
        for k in range(log.slots):
            rows = mask[:, k]
            sums = RidgeSums.zeros(options.folds, 1, log.X.shape[1])
            sums.add(log.X[rows], np.zeros(int(rows.sum()), dtype=np.int64), r[rows, k],
                     fold[rows])
            out.append(sums)
        return cls(out)

    def merge(self, other: RankRidgeSums) -> None:
        """Add another's sums (of other events; slots it adds are copied)."""
        for k, sums in enumerate(other.slots):
            if k == len(self.slots):
                self.slots.append(RidgeSums.zeros(len(sums.count), 1, sums.width))
            self.slots[k].merge(sums)

    def fit(self, lam: float) -> list[RidgeModel]:
        """Each slot's cross-fitted model."""
        return [sums.fit(lam) for sums in self.slots]


@dataclass
class RankSums:
    """Per slot, the :class:`~app.evaluation.estimators.LabelSums` of the events that showed
    it (module docstring)."""

    positions: list[LabelSums]

    @classmethod
    def zeros(cls) -> RankSums:
        return cls([])

    @property
    def n(self) -> int:
        """Events added (every event shows slot 0)."""
        return self.positions[0].n if self.positions else 0

    def _slot(self, k: int) -> LabelSums:
        while len(self.positions) <= k:
            self.positions.append(LabelSums.zeros())
        return self.positions[k]

    def add(self, log: RankLog, target: np.ndarray | None, keys: np.ndarray,
            options: Options, model: list[RidgeModel]) -> None:
        """Add the events of ``log`` (keys: their positions in the log) under ``target``
        (placement probabilities, None for the logging policy) with the slots' reward models
        (a slot without one predicts 0)."""
        w = cascade_weights(log, target)
        r = slot_rewards(log, options)
        hashes = row_hash(keys, options.seed)
        fold = fold_of(hashes, options.folds)
        mask = log.shown_mask()
        for k in range(log.slots):
            rows = mask[:, k]
            if not rows.any():
                continue
            q = (model[k].predict(log.X[rows], fold[rows])[:, 0] if k < len(model)
                 else np.zeros(int(rows.sum())))
            self._slot(k).add_terms(w[rows, k], r[rows, k], q, q, hashes[rows])

    def merge(self, other: RankSums) -> None:
        for k, sums in enumerate(other.positions):
            self._slot(k).merge(sums)

    def thin_slots(self) -> list[int]:
        """The slots whose weights and clicks the result needs: those whose effective sample
        size is below :data:`~app.evaluation.heavy_tails.MIN_ESS`, and every slot when there
        is one and the result has slates (module docstring)."""
        thin = [k for k, sums in enumerate(self.positions) if sums.ess < MIN_ESS]
        return list(range(len(self.positions))) if thin and self._slates() else thin

    def _slates(self) -> bool:
        """Whether every event showed every slot (the result then has ``slates``)."""
        return all(sums.n == self.n for sums in self.positions)

    def result(self, options: Options, columns: SlotColumns,
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """The result of :func:`evaluate_ranking` from the sums, with the weights and clicks
        of the :meth:`thin_slots` (:func:`slot_columns`)."""
        if not self.positions:
            raise ValueError("the log has no events")
        each = [slot_options(options, k) for k in range(len(self.positions))]
        slots = [sums.evaluation(each[k], progress).to_dict()
                 for k, sums in enumerate(self.positions)]
        for k, (w, f) in columns.items():
            slots[k] = guard_heavy_tails(slots[k], w, f, options.level, each[k].rates())
        rates = options.rates()
        rates = None if rates is None else rates.for_slots(len(self.positions))
        result = dict(slots[0])
        result["correction"] = correction_of(rates)  # every slot's, not slot 0's alone
        result["slot_impressions"] = sum(sums.n for sums in self.positions)
        result["positions"] = [{"position": k, **slot} for k, slot in enumerate(slots)]
        if self._slates():
            terms = [sums.sums for sums in self.positions]
            n, wr, w_sum = (LABEL_TERMS.index(name) for name in ("n", "wr", "w"))
            slates = SlateSums.of_slots(terms[0].column(n), [t.column(wr) for t in terms],
                                        [t.column(w_sum) for t in terms])
            result["slates"] = slates.evaluation(options.with_rates(rates),
                                                 progress).to_dict()
            del result["slates"]["correction"]  # the same as the result's
            if any(slot.get("insufficient_data") for slot in slots):
                result["slates"] = guard_slates(
                    result["slates"], [columns[k] for k in range(len(slots))],
                    [slot.rates() for slot in each], options.level)
        return result


def slot_columns(batches: Iterable[tuple[RankLog, np.ndarray | None]], slots: list[int]
                 ) -> SlotColumns:
    """The cascade weights and raw clicks at each of ``slots`` of the events that showed it,
    over ``batches`` of events and their targets in log order."""
    parts: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {k: ([], []) for k in slots}
    for log, target in batches:
        w = cascade_weights(log, target)
        mask = log.shown_mask()
        for k in slots:
            if k < log.slots:
                parts[k][0].append(w[mask[:, k], k])
                parts[k][1].append(log.clicks[mask[:, k], k])
    return {k: (_joined(ws), _joined(fs)) for k, (ws, fs) in parts.items()}


def joined_columns(parts: Iterable[SlotColumns], slots: list[int]) -> SlotColumns:
    """The :func:`slot_columns` of consecutive parts of a log, in order, as one."""
    chunks = list(parts)
    return {k: (_joined([c[k][0] for c in chunks]), _joined([c[k][1] for c in chunks]))
            for k in slots}


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0)


#: A rank log's evaluation (:mod:`app.evaluation.streaming`).
RANK = Kind(RankRidgeSums.of, RankSums.zeros)


def evaluate_ranking(log: RankLog, target: np.ndarray | None, rho0: float | None = None,
                     rho1: float | None = None, rho0_se: float = 0.0, rho1_se: float = 0.0,
                     n_boot: int = 200, seed: int = 0,
                     progress: Callable[[int], None] | None = None,
                     keys: np.ndarray | None = None, rates: SlotRates | None = None
                     ) -> dict[str, Any]:
    """The result of ``target`` (``n x L`` placement probabilities, None for the logging
    policy) on ``log`` (module docstring): slot 0's IPS, SNIPS and DR with ``n`` events,
    ``slot_impressions``, ``positions`` and, when every event showed as many slots,
    ``slates``; the accumulators over one batch.  ``keys``: the events' positions in the
    log (:func:`app.evaluation.sums.row_keys`; by default ``0 .. n - 1``).  Corrected by
    ``rates`` (per slot) or ``rho0, rho1`` (every slot alike)."""
    options = Options(rho0, rho1, rho0_se, rho1_se, n_boot, seed=seed, slot_rates=rates)
    keys = row_keys(np.arange(log.n)) if keys is None else keys
    model = RankRidgeSums.of(log.rows(slice(FIT_EVENTS)), keys[:FIT_EVENTS],
                             options).fit(options.ridge)
    sums = RankSums.zeros()
    sums.add(log, target, keys, options, model)
    return sums.result(options, slot_columns([(log, target)], sums.thin_slots()), progress)


def evaluate_ranking_parts(parts: Sequence[P], reader: Reader[P], policy: Policy,
                           options: Options, workers: int = 1,
                           progress: Callable[[int], None] | None = None,
                           engine: Callable[..., Any] = sum_parts) -> dict[str, Any]:
    """:func:`evaluate_ranking` of ``policy`` (:func:`rank_policy`) on the rank log made of
    ``parts``, summed by ``engine`` (:func:`app.evaluation.streaming.sum_parts`, or
    :func:`app.evaluation.spark.sum_parts_spark`), with one more pass over the
    :meth:`RankSums.thin_slots` when there are any (here: their columns are in log order)."""
    sums: RankSums = engine(parts, reader, policy, options, workers, progress, kind=RANK)
    thin = sums.thin_slots()
    columns = slot_columns(((log, policy(log)) for log, _ in chain(parts, reader)),
                           thin) if thin else {}
    return sums.result(options, columns)
