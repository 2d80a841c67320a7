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
``r_i = f_i``.  :attr:`Evaluation.correction` says which was applied.

**Intervals.**  Percentile bootstrap (Efron & Tibshirani 1993): events are
resampled with replacement ``n_boot`` times (a seeded
:class:`numpy.random.Generator`, resamples drawn as index matrices), each
estimator recomputed on every resample with the reward model held fixed,
and the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2``
quantiles.

**Uncertain rates.**  When the rates are themselves estimates with standard
errors ``se0, se1``, each resample also draws its own rates,
``rho_b ~ N(rho, se)`` clipped to ``[0, 1]`` with ``1 - rho0_b - rho1_b``
kept at least :data:`app.learners.proxy.BETA_FLOOR`
(:func:`rate_resampling`), so that the interval carries the rates' error
too.  No refit is needed: ``h_b(f) = a_b h(f) + c_b`` with
``a_b = beta / beta_b`` and ``c_b = (rho0 - rho0_b) / beta_b``, and the
ridge reward model (intercept not penalised) maps the same way, so IPS
becomes ``a_b V + c_b mean(w)``, SNIPS and DR ``a_b V + c_b``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.evaluation.reward_model import cross_fitted_rewards
from app.learners.proxy import BETA_FLOOR, check_noise_rates, unbiased_click

#: Elements of one block of bootstrap index matrix (bounds its memory to ~32 MB).
BOOTSTRAP_BLOCK = 1 << 22

ESTIMATORS = ("ips", "snips", "dr")


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

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``noisyloop evaluate``."""
        return {"ips": self.ips.to_dict(), "snips": self.snips.to_dict(),
                "dr": self.dr.to_dict(), "n": self.n, "ess": self.ess,
                "correction": self.correction}


def corrected_rewards(f: np.ndarray, rho0: float | None, rho1: float | None,
                      rho0_se: float = 0.0, rho1_se: float = 0.0
                      ) -> tuple[np.ndarray, dict[str, Any]]:
    """The reward the estimators use and the correction applied: ``h(f)`` with both rates
    given (validated by :func:`app.learners.proxy.check_noise_rates`), ``f`` with neither;
    standard errors of the rates (module docstring) need the rates."""
    if min(rho0_se, rho1_se) < 0 or not np.isfinite(rho0_se + rho1_se):
        raise ValueError("rho0_se and rho1_se must be finite and >= 0")
    if rho0 is None and rho1 is None:
        if rho0_se or rho1_se:
            raise ValueError("rho0_se and rho1_se need rho0 and rho1")
        return f.astype(np.float64), {"reward": "f (no noise correction)", "rho0": None,
                                      "rho1": None}
    if rho0 is None or rho1 is None:
        raise ValueError("give both rho0 and rho1 (or neither)")
    r0, r1 = check_noise_rates(rho0, rho1)
    correction: dict[str, Any] = {"reward": "h(f) = (f - rho0) / (1 - rho0 - rho1)",
                                  "rho0": r0, "rho1": r1}
    if rho0_se or rho1_se:
        correction["rate_uncertainty"] = {
            "rho0_se": float(rho0_se), "rho1_se": float(rho1_se),
            "draws": "each bootstrap resample draws rho ~ N(rho, se), clipped to [0, 1]"}
    return unbiased_click(f.astype(np.float64), r0, r1), correction


def rate_resampling(correction: dict[str, Any], n_boot: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per resample, ``(a_b, c_b)`` with ``h_b(f) = a_b h(f) + c_b`` for rates drawn from
    ``N(rho, se)`` (module docstring); ``None`` when the correction has no rate errors."""
    spread = correction.get("rate_uncertainty")
    if spread is None:
        return None
    rho0, rho1 = correction["rho0"], correction["rho1"]
    draws = rng.normal([rho0, rho1], [spread["rho0_se"], spread["rho1_se"]], size=(n_boot, 2))
    draws = np.clip(draws, 0.0, 1.0)
    beta_b = np.maximum(1.0 - draws.sum(axis=1), BETA_FLOOR)
    return (1.0 - rho0 - rho1) / beta_b, (rho0 - draws[:, 0]) / beta_b


def effective_sample_size(w: np.ndarray) -> float:
    """Kish's ``(sum w)^2 / sum w^2`` (0 when every weight is 0)."""
    total = float(np.dot(w, w))
    return float(w.sum()) ** 2 / total if total > 0 else 0.0


def _statistics(sums: np.ndarray, n: int) -> np.ndarray:
    """IPS, SNIPS, DR from column sums ``[sum w r, sum w, sum dr_i]`` (rows: resamples)."""
    u, w, d = sums[..., 0], sums[..., 1], sums[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        snips = np.where(w > 0, u / np.where(w > 0, w, 1.0), 0.0)
    return np.stack([u / n, snips, d / n], axis=-1)


def resampled_sums(terms: np.ndarray, n_boot: int, rng: np.random.Generator,
                   progress: Callable[[int], None] | None = None) -> np.ndarray:
    """``n_boot x m`` column sums of the ``n x m`` per-event ``terms`` over bootstrap
    resamples of their rows.

    Resamples are drawn in blocks as index matrices; each row's indices become
    counts (how often each event was drawn, one ``bincount`` for the block),
    and the resampled sums are ``counts @ terms``.
    """
    n = len(terms)
    per_block = max(1, BOOTSTRAP_BLOCK // n)
    index_type = np.int32 if per_block * n < 2**31 else np.int64
    columns = np.ascontiguousarray(terms.T)
    sums = np.empty((n_boot, terms.shape[1]))
    for start in range(0, n_boot, per_block):
        b = min(per_block, n_boot - start)
        offsets = (np.arange(b) * n).astype(index_type)[:, None]
        idx: np.ndarray = rng.integers(0, n, size=(b, n), dtype=index_type)
        idx += offsets
        counts = np.bincount(idx.ravel(), minlength=b * n).reshape(b, n)
        sums[start:start + b] = (columns @ counts.T).T
        if progress is not None:
            progress(b)
    return sums


def evaluate(log: LabelLog, target: np.ndarray | None, rho0: float | None = None,
             rho1: float | None = None, rho0_se: float = 0.0, rho1_se: float = 0.0,
             n_boot: int = 200, level: float = 0.95,
             seed: int = 0, folds: int = 2, ridge: float = 1.0,
             q: np.ndarray | None = None,
             progress: Callable[[int], None] | None = None) -> Evaluation:
    """IPS, SNIPS and DR of ``target`` on ``log`` (module docstring).

    ``target`` is the ``n x K`` matrix of ``pi(a | x_i)``, or ``None`` for the logging
    policy whose probabilities of the actions not taken are unknown: then ``w_i = 1`` and
    DR's direct term ``sum_a pi(a | x_i) q(x_i, a)`` is ``q(x_i, a_i)``, an unbiased
    estimate of it.  ``q`` (``n x K``) replaces the cross-fitted ridge reward model (it
    must be fitted on the same corrected rewards).  ``rho0_se``, ``rho1_se``: standard
    errors of the rates, drawn per resample (module docstring).  ``progress(k)`` is called
    as ``k`` bootstrap resamples finish.
    """
    r, correction = corrected_rewards(log.rewards, rho0, rho1, rho0_se, rho1_se)
    rng = np.random.default_rng(seed)
    if q is None:
        q = cross_fitted_rewards(log.X, log.actions, r, log.n_actions, folds=folds,
                                 lam=ridge, rng=rng)
    rows = np.arange(log.n)
    q_taken = q[rows, log.actions]
    if target is None:
        w = np.ones(log.n)
        direct = q_taken
    else:
        if target.shape != (log.n, log.n_actions):
            raise ValueError(f"target must be {log.n} x {log.n_actions}, got {target.shape}")
        w = target[rows, log.actions] / log.propensities
        direct = np.einsum("ij,ij->i", target, q)
    return _bootstrap(w, r, direct, q_taken, correction, n_boot, level, rng, progress)


def evaluate_weights(X: np.ndarray, rewards: np.ndarray, w: np.ndarray,
                     rho0: float | None = None, rho1: float | None = None,
                     rho0_se: float = 0.0, rho1_se: float = 0.0, n_boot: int = 200,
                     level: float = 0.95, seed: int = 0, folds: int = 2, ridge: float = 1.0,
                     progress: Callable[[int], None] | None = None) -> Evaluation:
    """IPS, SNIPS and DR of a target known by its importance weight ``w_i`` on each event
    (contexts ``X``, observed rewards ``rewards``), for targets whose actions differ from
    event to event (a ranking of each request's own candidates).

    DR's reward model is then a cross-fitted ridge of the reward on the context alone,
    ``q(x_i)``, so that its direct term ``sum_a pi(a | x_i) q(x_i)`` is ``q(x_i)`` for any
    target: DR is unbiased whatever ``q`` (Dudík, Langford & Li 2011), and a
    ``q`` blind to the action gives up only part of its variance reduction.  The other
    arguments as in :func:`evaluate`.
    """
    r, correction = corrected_rewards(rewards, rho0, rho1, rho0_se, rho1_se)
    rng = np.random.default_rng(seed)
    n = len(r)
    q = cross_fitted_rewards(X, np.zeros(n, dtype=np.int64), r, 1, folds=folds, lam=ridge,
                             rng=rng)[:, 0]
    return _bootstrap(np.asarray(w, dtype=np.float64), r, q, q, correction, n_boot, level,
                      rng, progress)


def _bootstrap(w: np.ndarray, r: np.ndarray, direct: np.ndarray, q_taken: np.ndarray,
               correction: dict[str, Any], n_boot: int, level: float,
               rng: np.random.Generator, progress: Callable[[int], None] | None
               ) -> Evaluation:
    """IPS, SNIPS and DR with their bootstrap intervals from the per-event weights, rewards,
    DR direct terms and reward-model predictions of the actions taken (module docstring)."""
    n = len(w)
    terms = np.stack([w * r, w, direct + w * (r - q_taken)], axis=1)
    point = _statistics(terms.sum(axis=0), n)
    sums = resampled_sums(terms, n_boot, rng, progress)
    replicates = _statistics(sums, n)
    rates = rate_resampling(correction, n_boot, rng)
    if rates is not None:
        scale, shift = rates
        replicates = scale[:, None] * replicates + shift[:, None]
        replicates[:, 0] += shift * (sums[:, 1] / n - 1.0)  # IPS: c_b mean(w), not c_b
    quantiles = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
    ips, snips, dr = (Estimate(float(point[j]), float(quantiles[0, j]), float(quantiles[1, j]))
                      for j in range(3))
    return Evaluation(ips=ips, snips=snips, dr=dr, n=n, ess=effective_sample_size(w),
                      correction=correction)


def per_position(log: LabelLog, target: np.ndarray | None, positions: np.ndarray,
                 estimate: Callable[[LabelLog, np.ndarray | None], dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """``{"position": k, **estimate(events at k, target rows at k)}`` for each position of a
    log of slots (an OBD or rank log), positions in order."""
    return [{"position": slot, **estimate(log.rows(positions == slot),
                                          None if target is None else target[positions == slot])}
            for slot in sorted(set(positions.tolist()))]
