"""IPS, self-normalised IPS and doubly robust estimates of a target policy's value on a log.

A *label* log holds, per event ``i``: the context ``x_i``, the action
``a_i`` in ``0 .. K - 1`` that the logging policy ``mu`` took with the
logged propensity ``p_i = mu(a_i | x_i)``, and the observed reward (a
click) ``f_i``.  With the target policy ``pi`` (an ``n x K`` matrix of
``pi(a | x_i)``), the importance weight is ``w_i = pi(a_i | x_i) / p_i``
and, with ``r_i`` the reward used (below),

* IPS (inverse propensity scoring, Horvitz & Thompson 1952):
  ``V_IPS = (1/n) sum_i w_i r_i``;
* SNIPS (self-normalised IPS, Swaminathan & Joachims 2015, "The
  Self-Normalized Estimator for Counterfactual Learning"):
  ``V_SNIPS = sum_i w_i r_i / sum_i w_i``;
* DR (doubly robust, Dudík, Langford & Li 2011, "Doubly Robust Policy
  Evaluation and Learning"): with a reward model ``q(x, a)``,
  ``V_DR = (1/n) sum_i [ sum_a pi(a | x_i) q(x_i, a) + w_i (r_i - q(x_i, a_i)) ]``;
  ``q`` is the cross-fitted ridge of :mod:`app.evaluation.reward_model`;
* ESS (Kish's effective sample size): ``(sum_i w_i)^2 / sum_i w_i^2``.

These are Open Bandit Pipeline's ``InverseProbabilityWeighting``,
``SelfNormalizedInverseProbabilityWeighting`` and ``DoublyRobust``
(Saito et al. 2021) without clipping.  IPS and DR are unbiased when
``p_i > 0`` wherever ``pi`` puts mass; SNIPS is consistent.

**Click noise.**  When the logged click is a noisy version of the true one,
with ``rho0 = P(f = 1 | true 0)`` and ``rho1 = P(f = 0 | true 1)``,
``E[f] = rho0 + (1 - rho0 - rho1) E[r]``, so every estimator above is
biased.  With the rates given, every estimator (and the reward model) uses
``r_i = h(f_i) = (f_i - rho0) / (1 - rho0 - rho1)``, whose mean is the true
click rate (:func:`app.learners.proxy.unbiased_click`); without them
``r_i = f_i``.  The clicks of a ranking's slot ``k`` are corrected by that
slot's examination and trust bias, ``(f - beta_k) / alpha_k``
(:mod:`app.evaluation.rates`), of which ``h`` is the case ``theta = 1``.
:attr:`Evaluation.correction` says which was applied.

**Streaming.**  Each estimator is a function of column sums of per-event
terms (:data:`LABEL_TERMS`), which :class:`LabelSums` keeps as a mergeable
accumulator (:mod:`app.evaluation.sums`); the reward model is fitted from
mergeable sums too (:mod:`app.evaluation.reward_model`), on a first pass
over the log's first :data:`FIT_EVENTS` events.  :func:`evaluate` is that
code over one batch, so a log in memory, streamed in batches, over several
processes or Spark tasks gives the same estimates up to rounding.

**Intervals.**  Percentile bootstrap (Efron & Tibshirani 1993) over hashed
buckets of events (:class:`app.evaluation.sums.TermSums`): ``n_boot``
resamples of the buckets, each estimator recomputed on every resample with
the reward model held fixed, and the interval is the ``(1 - level) / 2`` and
``(1 + level) / 2`` quantiles.

**Uncertain rates.**  When the rates are themselves estimates with standard
errors ``se0, se1``, each resample also draws its own rates,
``rho_b ~ N(rho, se)`` clipped to ``[0, 1]`` with ``1 - rho0_b - rho1_b``
kept at least :data:`app.learners.proxy.BETA_FLOOR`
(:meth:`app.evaluation.rates.SlotRates.resampling`, with ``theta`` too for a
ranking's slot), so that the interval carries the rates' error too.  No
refit is needed: ``h_b(f) = a_b h(f) + c_b`` with
``a_b = beta / beta_b`` and ``c_b = (rho0 - rho0_b) / beta_b``, and the
ridge reward model (intercept not penalised) maps the same way, so IPS
becomes ``a_b V + c_b mean(w)``, SNIPS and DR ``a_b V + c_b``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.evaluation.rates import SlotRates, corrected, correction_of, noise_rates
from app.evaluation.reward_model import RidgeModel, RidgeSums
from app.evaluation.sums import Kind, TermSums, fold_of, row_hash, row_keys
from app.evaluation.sums import resampled_sums as resampled_sums

ESTIMATORS = ("ips", "snips", "dr")
#: What each column of a label evaluation's sums adds up, per event (``dr``: DR's term,
#: ``wr2``: ``(w r)^2``, ``nonzero``: 1 where ``w > 0``).
LABEL_TERMS = ("n", "wr", "w", "dr", "w2", "wr2", "nonzero")
#: Events the reward model is fitted on: the log's first (all of a smaller log).
FIT_EVENTS = 1_000_000


@dataclass(frozen=True)
class LabelLog:
    """A logged label (contextual bandit) data set; see the module docstring."""

    X: np.ndarray
    """``n x d`` contexts (the reward model's features)."""
    actions: np.ndarray
    """``n`` actions taken, in ``0 .. n_actions - 1``."""
    propensities: np.ndarray
    """``n`` logged probabilities ``mu(a_i | x_i)``, in ``(0, 1]``."""
    rewards: np.ndarray
    """``n`` observed rewards or clicks ``f_i``."""
    n_actions: int
    logging: np.ndarray | None = None
    """The logging policy's ``n x K`` matrix when known (simulations)."""

    def __post_init__(self) -> None:
        n = len(self.actions)
        if n == 0:
            raise ValueError("the log has no events")
        if self.X.ndim != 2 or self.X.shape[0] != n or len(self.propensities) != n \
                or len(self.rewards) != n:
            raise ValueError("X, actions, propensities and rewards must have one row per event")
        if self.actions.min() < 0 or self.actions.max() >= self.n_actions:
            raise ValueError(f"actions must lie in 0..{self.n_actions - 1}")
        if not np.all((self.propensities > 0) & (self.propensities <= 1)):
            raise ValueError("propensities must lie in (0, 1]")

    @property
    def n(self) -> int:
        return len(self.actions)

    def rows(self, rows: np.ndarray | slice) -> LabelLog:
        """The events at ``rows`` (a boolean mask, indices or a slice)."""
        return LabelLog(X=self.X[rows], actions=self.actions[rows],
                        propensities=self.propensities[rows], rewards=self.rewards[rows],
                        n_actions=self.n_actions,
                        logging=None if self.logging is None else self.logging[rows])

    def logged_play(self) -> dict[str, np.ndarray]:
        """The played labels, their propensities and clicks, as label learners learn them."""
        return {"played": self.actions, "prob": self.propensities, "click": self.rewards}


@dataclass(frozen=True)
class Estimate:
    """One estimator's value and its bootstrap interval."""

    value: float
    ci_low: float
    ci_high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high}


@dataclass(frozen=True)
class Evaluation:
    """IPS, SNIPS and DR estimates of one target policy on one log."""

    ips: Estimate
    snips: Estimate
    dr: Estimate
    n: int
    ess: float
    correction: dict[str, Any]
    """``{"reward": "h(f) = ...", "rho0", "rho1"}`` or ``{"reward": "f", ...}`` (none), with
    ``"rate_uncertainty": {"rho0_se", "rho1_se", "draws"}`` when the rates have errors."""
    totals: dict[str, float]
    """The sums behind IPS and SNIPS, with ``r_i`` the reward :attr:`correction` names:
    ``sum_wr`` (``sum_i w_i r_i``), ``sum_w`` (``sum_i w_i``), ``sum_wr_squared``
    (``sum_i (w_i r_i)^2``) and ``nonzero_weights`` (events with ``w_i > 0``); IPS is
    ``sum_wr / n``, SNIPS ``sum_wr / sum_w``."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``noisyloop evaluate``."""
        return {"ips": self.ips.to_dict(), "snips": self.snips.to_dict(),
                "dr": self.dr.to_dict(), "n": self.n, "ess": self.ess,
                "correction": self.correction, "totals": self.totals}


def corrected_rewards(f: np.ndarray, rho0: float | None, rho1: float | None,
                      rho0_se: float = 0.0, rho1_se: float = 0.0
                      ) -> tuple[np.ndarray, dict[str, Any]]:
    """The reward the estimators use and the correction applied: ``h(f)`` with both rates
    given (validated by :func:`app.learners.proxy.check_noise_rates`), ``f`` with neither;
    standard errors of the rates (module docstring) need the rates."""
    return corrected(f, noise_rates(rho0, rho1, rho0_se, rho1_se))


@dataclass(frozen=True)
class Options:
    """How a label evaluation estimates (the arguments of :func:`evaluate`)."""

    rho0: float | None = None
    rho1: float | None = None
    rho0_se: float = 0.0
    rho1_se: float = 0.0
    n_boot: int = 200
    level: float = 0.95
    seed: int = 0
    folds: int = 2
    ridge: float = 1.0
    slot_rates: SlotRates | None = None
    """Rates in place of ``rho0``, ``rho1``: of one slot (a ranking's slot, whose examination
    ``theta`` and click noise :class:`~app.evaluation.rates.SlotRates` hold), or of every
    slot of a slate (:class:`app.evaluation.slates.SlateSums`)."""

    def rates(self) -> SlotRates | None:
        """The rates the rewards are corrected by (None: none; ValueError for rates that
        cannot be used)."""
        return noise_rates(self.rho0, self.rho1, self.rho0_se, self.rho1_se, self.slot_rates)

    def reward(self, f: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """The corrected rewards of ``f`` with these rates and the correction applied."""
        return corrected(f, self.rates())

    def correction(self) -> dict[str, Any]:
        """The correction applied (ValueError for rates that cannot be used)."""
        return correction_of(self.rates())

    def with_rates(self, rates: SlotRates | None) -> Options:
        """These options corrected by ``rates`` instead (unchanged for None)."""
        if rates is None:
            return self
        return replace(self, rho0=None, rho1=None, rho0_se=0.0, rho1_se=0.0, slot_rates=rates)


def reward_sums(log: LabelLog, keys: np.ndarray, options: Options) -> RidgeSums:
    """The reward model's sums of the events of ``log`` (keys: their positions in the log,
    :func:`app.evaluation.sums.row_keys`)."""
    sums = RidgeSums.zeros(options.folds, log.n_actions, log.X.shape[1])
    sums.add(log.X, log.actions, options.reward(log.rewards)[0],
             fold_of(row_hash(keys, options.seed), options.folds))
    return sums


def importance_weights(log: LabelLog, target: np.ndarray | None) -> np.ndarray:
    """``w_i = pi(a_i | x_i) / p_i`` of ``target`` (``n x K``; None, the logging policy: 1)
    on the events of ``log``."""
    if target is None:
        return np.ones(log.n)
    if target.shape != (log.n, log.n_actions):
        raise ValueError(f"target must be {log.n} x {log.n_actions}, got {target.shape}")
    w: np.ndarray = target[np.arange(log.n), log.actions] / log.propensities
    return w


@dataclass
class LabelSums:
    """The mergeable accumulator of a label evaluation: the :data:`LABEL_TERMS` sums."""

    sums: TermSums

    @classmethod
    def zeros(cls) -> LabelSums:
        return cls(TermSums.zeros(len(LABEL_TERMS)))

    @property
    def n(self) -> int:
        """Events added."""
        return int(self.sums.totals[0])

    @property
    def ess(self) -> float:
        """Kish's effective sample size of the weights added (0 without a weight)."""
        w, w2 = float(self.sums.totals[2]), float(self.sums.totals[4])
        return w * w / w2 if w2 > 0 else 0.0

    def add(self, log: LabelLog, target: np.ndarray | None, keys: np.ndarray,
            options: Options, model: RidgeModel | None = None, q: np.ndarray | None = None
            ) -> None:
        """Add the events of ``log`` under ``target`` (as in :func:`evaluate`) with the
        reward model ``model`` (or its predictions ``q``, ``n x K``)."""
        r = options.reward(log.rewards)[0]
        hashes = row_hash(keys, options.seed)
        if q is None:
            assert model is not None
            q = model.predict(log.X, fold_of(hashes, options.folds))
        q_taken = q[np.arange(log.n), log.actions]
        w = importance_weights(log, target)
        direct = q_taken if target is None else np.einsum("ij,ij->i", target, q)
        self.add_terms(w, r, direct, q_taken, hashes)

    def add_terms(self, w: np.ndarray, r: np.ndarray, direct: np.ndarray,
                  q_taken: np.ndarray, hashes: np.ndarray) -> None:
        """Add events by their weights, rewards, DR direct terms and reward-model
        predictions of the actions taken."""
        wr = w * r
        terms = np.stack([np.ones(len(w)), wr, w, direct + w * (r - q_taken), w * w, wr * wr,
                          w > 0], axis=1)
        self.sums.add(terms, hashes)

    def merge(self, other: LabelSums) -> None:
        self.sums.merge(other.sums)

    def evaluation(self, options: Options,
                   progress: Callable[[int], None] | None = None) -> Evaluation:
        """IPS, SNIPS and DR with their intervals (module docstring)."""
        correction = options.correction()
        totals = self.sums.totals
        n = int(totals[0])
        if n == 0:
            raise ValueError("the log has no events")
        point = _statistics(totals[None, :4])[0]
        rng = np.random.default_rng(options.seed)
        sums = self.sums.resampled(options.n_boot, rng, progress)
        replicates = _statistics(sums)
        rates = options.rates()
        spread = None if rates is None else rates.resampling(options.n_boot, rng)
        if spread is not None:
            scale, shift = spread[0][:, 0], spread[1][:, 0]
            replicates = scale[:, None] * replicates + shift[:, None]
            with np.errstate(invalid="ignore", divide="ignore"):  # IPS: c_b mean(w)
                replicates[:, 0] += shift * (sums[:, 2] / sums[:, 0] - 1.0)
        level = options.level
        quantiles = np.nanquantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
        ips, snips, dr = (Estimate(float(point[j]), float(quantiles[0, j]),
                                   float(quantiles[1, j])) for j in range(3))
        sums_of = dict(zip(LABEL_TERMS, totals.tolist(), strict=True))
        return Evaluation(ips=ips, snips=snips, dr=dr, n=n, ess=self.ess,
                          correction=correction,
                          totals={"sum_wr": sums_of["wr"], "sum_w": sums_of["w"],
                                  "sum_wr_squared": sums_of["wr2"],
                                  "nonzero_weights": round(sums_of["nonzero"])})


#: What a label log's streamed evaluation sums (:mod:`app.evaluation.streaming`).
LABEL = Kind(reward_sums, LabelSums.zeros)


def _statistics(sums: np.ndarray) -> np.ndarray:
    """IPS, SNIPS, DR from rows of sums ``[n, sum w r, sum w, sum dr_i, ...]`` (NaN for a
    resample without events)."""
    n, u, w, d = sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3]
    with np.errstate(invalid="ignore", divide="ignore"):
        snips = np.where(w > 0, u / np.where(w > 0, w, 1.0), 0.0)
        return np.stack([u / n, snips, d / n], axis=-1)


def evaluate(log: LabelLog, target: np.ndarray | None, rho0: float | None = None,
             rho1: float | None = None, rho0_se: float = 0.0, rho1_se: float = 0.0,
             n_boot: int = 200, level: float = 0.95,
             seed: int = 0, folds: int = 2, ridge: float = 1.0,
             q: np.ndarray | None = None,
             progress: Callable[[int], None] | None = None,
             keys: np.ndarray | None = None) -> Evaluation:
    """IPS, SNIPS and DR of ``target`` on ``log`` (module docstring): the accumulators over
    one batch.

    ``target`` is the ``n x K`` matrix of ``pi(a | x_i)``, or ``None`` for the logging
    policy whose probabilities of the actions not taken are unknown: then ``w_i = 1`` and
    DR's direct term ``sum_a pi(a | x_i) q(x_i, a)`` is ``q(x_i, a_i)``, an unbiased
    estimate of it.  ``q`` (``n x K``) replaces the cross-fitted ridge reward model (it
    must be fitted on the same corrected rewards).  ``rho0_se``, ``rho1_se``: standard
    errors of the rates, drawn per resample (module docstring).  ``progress(k)`` is called
    as ``k`` bootstrap resamples finish.  ``keys``: the events' positions in the log
    (:func:`app.evaluation.sums.row_keys`; by default ``0 .. n - 1``).
    """
    options = Options(rho0, rho1, rho0_se, rho1_se, n_boot, level, seed, folds, ridge)
    keys = row_keys(np.arange(log.n)) if keys is None else keys
    if q is None:
        q = reward_predictions(log, keys, options)
    sums = LabelSums.zeros()
    sums.add(log, target, keys, options, q=q)
    return sums.evaluation(options, progress)


def evaluate_weights(X: np.ndarray, rewards: np.ndarray, w: np.ndarray,
                     rho0: float | None = None, rho1: float | None = None,
                     rho0_se: float = 0.0, rho1_se: float = 0.0, n_boot: int = 200,
                     level: float = 0.95, seed: int = 0, folds: int = 2, ridge: float = 1.0,
                     progress: Callable[[int], None] | None = None,
                     rates: SlotRates | None = None) -> Evaluation:
    """IPS, SNIPS and DR of a target known by its importance weight ``w_i`` on each event
    (contexts ``X``, observed rewards ``rewards``), for targets whose actions differ from
    event to event (a ranking of each request's own candidates).

    DR's reward model is then a cross-fitted ridge of the reward on the context alone,
    ``q(x_i)``, so that its direct term ``sum_a pi(a | x_i) q(x_i)`` is ``q(x_i)`` for any
    target: DR is unbiased whatever ``q`` (Dudík, Langford & Li 2011), and a
    ``q`` blind to the action gives up only part of its variance reduction.  The other
    arguments as in :func:`evaluate`; ``rates``: the rates of one slot in place of ``rho0``
    and ``rho1`` (the slot of a ranking the rewards were clicked in).
    """
    options = Options(rho0, rho1, rho0_se, rho1_se, n_boot, level, seed, folds, ridge, rates)
    n = len(rewards)
    if n == 0:
        raise ValueError("the log has no events")
    r = options.reward(rewards)[0]
    hashes = row_hash(row_keys(np.arange(n)), seed)
    fold = fold_of(hashes, folds)
    ridge_sums = RidgeSums.zeros(folds, 1, X.shape[1])
    zeros = np.zeros(n, dtype=np.int64)
    ridge_sums.add(X, zeros, r, fold)
    q = ridge_sums.fit(ridge).predict(X, fold)[:, 0]
    sums = LabelSums.zeros()
    sums.add_terms(np.asarray(w, dtype=np.float64), r, q, q, hashes)
    return sums.evaluation(options, progress)


def reward_predictions(log: LabelLog, keys: np.ndarray, options: Options) -> np.ndarray:
    """The cross-fitted reward model's predictions ``q(x_i, a)`` (``n x K``) on ``log``, as
    :func:`evaluate` fits and applies it (keys: the events' positions in the log)."""
    model = reward_sums(log.rows(slice(FIT_EVENTS)), keys[:FIT_EVENTS], options).fit(
        options.ridge)
    q: np.ndarray = model.predict(log.X, fold_of(row_hash(keys, options.seed), options.folds))
    return q


def per_position(log: LabelLog, target: np.ndarray | None, positions: np.ndarray,
                 estimate: Callable[[LabelLog, np.ndarray | None, np.ndarray, np.ndarray],
                                    dict[str, Any]],
                 keys: np.ndarray, q: np.ndarray) -> list[dict[str, Any]]:
    """``{"position": k, **estimate(events at k, target rows at k, their keys, their q)}``
    for each position of a log of slots (an OBD log), positions in order.

    Every position's DR uses the pooled log's reward model ``q`` (:func:`reward_predictions`),
    so that, as IPS, the positions' values weighted by their impressions add up to the
    pooled value: each event's DR term is the same in both (a reward model fitted on each
    position's events alone gave other terms, and the weighted per-position DR of the OBD
    BTS log's uniform policy read 0.0042 where the pooled one read 0.0026)."""
    out = []
    for slot in sorted(set(positions.tolist())):
        rows = positions == slot
        out.append({"position": slot, **estimate(log.rows(rows),
                                                 None if target is None else target[rows],
                                                 keys[rows], q[rows])})
    return out
