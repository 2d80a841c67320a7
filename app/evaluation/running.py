"""Running sums of a challenger policy's value against the logging policy, with intervals.

A *challenger* follows a model's event stream without serving.  For each
logged event ``i`` (action ``a_i`` taken by the serving policy, the
champion, with logged propensity ``p_i`` and observed click ``f_i``)
the challenger contributes an importance weight ``w_i = pi(a_i | x_i) /
p_i``; where the challenger only draws its action (its decision, not its
distribution), ``pi(a_i | x_i)`` is estimated without bias by the
indicator that its draw is ``a_i``.

:class:`RunningValue` keeps nine sums of the observed clicks, so that
batches add up and the estimates never need the events again.

**Click noise.**  The reward is ``r_i = h(f_i) = (f_i - rho0) / (1 - rho0 -
rho1)`` (:func:`app.learners.proxy.unbiased_click`) at the rates given when
the value is *read* (:class:`Rates`), not those in force when each event was
added: ``h`` is affine, so every sum of ``h`` follows exactly from the sums
of ``f`` (:meth:`RunningValue.corrected`), and a refreshed estimate of the
rates corrects all events alike.  When the rates carry standard errors
``se0, se1`` (an estimate), each interval also carries their error, by the
delta method: an estimate ``V = (V_f - rho0 k) / beta`` (``k`` = 1 for a
mean, the mean weight for IPS, 0 for a difference) has
``dV/drho0 = (V - k) / beta`` and ``dV/drho1 = V / beta``, and
``se0^2 (V - k)^2 / beta^2 + se1^2 V^2 / beta^2`` is added to its sampling
variance (the rates' estimate independent of the events' sampling, its two
errors of each other, as :meth:`app.evaluation.rates.SlotRates.resampling`
draws them).  The estimates are then:

* the champion's on-policy value, the mean of ``r_i``;
* IPS ``(1/n) sum w_i r_i`` and SNIPS ``sum w_i r_i / sum w_i``
  (:mod:`app.evaluation.estimators`);
* SNIPS minus the champion's value on the same events (paired).

Intervals are normal approximations from the sample variance of each
estimator's influence terms (SNIPS and the difference by the delta method):
``estimate +- z * sqrt(sum psi_i^2 / (n (n - 1)) + rate variance)``.  Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from app.learners.proxy import check_noise_rates

#: Decimals an estimate and its bounds are shown with (far below any interval's width).
SHOWN_DIGITS = 6
#: Confidence level of the intervals shown (:func:`shown_value`).
LEVEL = 0.95
#: What each of the :class:`RunningValue` sums adds up, per event.
SUM_NAMES = ("n", "w", "w2", "wr", "w2r", "w2r2", "wr2", "r", "r2")
#: ``reward`` of saved stats whose sums add up the observed clicks ``f`` (stats saved before
#: had none: their sums added ``h(f)`` at the rates in force then).
CLICK_SUMS = "click"


@dataclass(frozen=True)
class Rates:
    """Click-noise rates a value's rewards ``h(f)`` are computed at, and their standard
    errors (0: known exactly)."""

    rho0: float = 0.0
    rho1: float = 0.0
    rho0_se: float = 0.0
    rho1_se: float = 0.0

    @property
    def beta(self) -> float:
        return 1.0 - self.rho0 - self.rho1


@dataclass(frozen=True)
class Interval:
    """An estimate and its two-sided interval (bounds None with fewer than two events)."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high}

    def rounded(self, digits: int = SHOWN_DIGITS) -> Interval:
        """The estimate and both bounds rounded alike to ``digits`` decimals (rounding keeps
        their order, so the interval still holds the estimate).

        >>> Interval(0.318, 0.2891217352083919, 0.3468782647916081).rounded()
        Interval(estimate=0.318, ci_low=0.289122, ci_high=0.346878)
        """
        def keep(v: float | None) -> float | None:
            return None if v is None else round(v, digits)

        return Interval(keep(self.estimate), keep(self.ci_low), keep(self.ci_high))


def _interval(estimate: float | None, square_sum: float, n: float, level: float,
              extra: float = 0.0) -> Interval:
    """``estimate +- z sqrt(square_sum / (n (n - 1)) + extra)`` (influence terms of mean zero;
    ``extra``: the variance the rates' error adds)."""
    if estimate is None or n < 2:
        return Interval(estimate, None, None)
    half = NormalDist().inv_cdf((1 + level) / 2) * float(np.sqrt(
        max(square_sum, 0.0) / (n * (n - 1)) + extra))
    return Interval(estimate, estimate - half, estimate + half)


def _affine(sums: np.ndarray, a: float, c: float) -> np.ndarray:
    """The :data:`SUM_NAMES` sums of rewards ``a r + c`` from those of ``r``."""
    n, w, w2, wr, w2r, w2r2, wr2, r, r2 = sums
    return np.array([n, w, w2, a * wr + c * w, a * w2r + c * w2,
                     a * a * w2r2 + 2 * a * c * w2r + c * c * w2,
                     a * a * wr2 + 2 * a * c * wr + c * c * w, a * r + c * n,
                     a * a * r2 + 2 * a * c * r + c * c * n])


class RunningValue:
    """The sums of :data:`SUM_NAMES` over the events seen so far (see the module docstring);
    its estimates are of the rewards added, with :attr:`rate_error` in their intervals."""

    def __init__(self, sums: list[float] | None = None) -> None:
        self.sums = np.zeros(len(SUM_NAMES)) if sums is None else np.asarray(sums, dtype=float)
        if self.sums.shape != (len(SUM_NAMES),):
            raise ValueError(f"expected {len(SUM_NAMES)} sums, got {self.sums.shape}")
        self.rate_error = Rates()
        """The rates the rewards were corrected at, with the errors the intervals carry."""

    def corrected(self, rates: Rates) -> RunningValue:
        """The value of ``h(f)`` at ``rates`` from these sums of clicks ``f`` (module
        docstring); ValueError for rates that cannot be used."""
        rho0, rho1 = check_noise_rates(rates.rho0, rates.rho1)
        beta = 1.0 - rho0 - rho1
        out = RunningValue(list(_affine(self.sums, 1.0 / beta, -rho0 / beta)))
        out.rate_error = rates
        return out

    def _rate_variance(self, value: float, k: float) -> float:
        """The variance the rates' errors add to an estimate ``value`` of mass ``k``."""
        e = self.rate_error
        return ((value - k) ** 2 * e.rho0_se ** 2 + value * value * e.rho1_se ** 2) / e.beta ** 2

    @property
    def n(self) -> int:
        """Events added."""
        return int(self.sums[0])

    def add(self, w: np.ndarray, r: np.ndarray) -> None:
        """Add events with importance weights ``w`` and rewards ``r``."""
        w = np.asarray(w, dtype=float)
        r = np.asarray(r, dtype=float)
        wr = w * r
        self.sums += [len(w), w.sum(), w @ w, wr.sum(), w @ wr, wr @ wr, wr @ r, r.sum(),
                      r @ r]

    def to_list(self) -> list[float]:
        return [float(s) for s in self.sums]

    def champion(self, level: float = 0.95) -> Interval:
        """The logging policy's mean reward ``(1/n) sum r_i``."""
        n, r, r2 = self.sums[0], self.sums[7], self.sums[8]
        if n == 0:
            return Interval(None, None, None)
        mean = float(r / n)
        return _interval(mean, r2 - n * mean * mean, n, level, self._rate_variance(mean, 1.0))

    def ips(self, level: float = 0.95) -> Interval:
        """IPS ``(1/n) sum w_i r_i``."""
        n, wr, w2r2 = self.sums[0], self.sums[3], self.sums[5]
        if n == 0:
            return Interval(None, None, None)
        value = float(wr / n)
        return _interval(value, w2r2 - n * value * value, n, level,
                         self._rate_variance(value, float(self.sums[1] / n)))

    def _snips_terms(self) -> tuple[float, float, float] | None:
        """SNIPS, the mean weight and the sum of its squared influence terms times the
        squared mean weight (None before any weight)."""
        n, w, w2, wr, w2r, w2r2 = self.sums[:6]
        if n == 0 or w <= 0:
            return None
        value = wr / w
        return float(value), float(w / n), float(w2r2 - 2 * value * w2r + value * value * w2)

    def snips(self, level: float = 0.95) -> Interval:
        """SNIPS ``sum w_i r_i / sum w_i`` (None before any positive weight)."""
        terms = self._snips_terms()
        if terms is None:
            return Interval(None, None, None)
        value, mean_w, scaled = terms
        return _interval(value, scaled / (mean_w * mean_w), self.sums[0], level,
                         self._rate_variance(value, 1.0))

    def snips_minus_champion(self, level: float = 0.95) -> Interval:
        """SNIPS minus the champion's mean reward on the same events (paired; delta method:
        influence ``(w_i r_i - V w_i) / mean(w) - (r_i - R)``)."""
        terms = self._snips_terms()
        if terms is None:
            return Interval(None, None, None)
        value, mean_w, scaled = terms
        n, w, wr, wr2, r, r2 = (self.sums[i] for i in (0, 1, 3, 6, 7, 8))
        mean_r = r / n
        cross = (wr2 - mean_r * wr - value * wr + value * mean_r * w) / mean_w
        squares = scaled / (mean_w * mean_w) - 2 * cross + (r2 - n * mean_r * mean_r)
        diff = value - float(mean_r)
        return _interval(diff, squares, n, level, self._rate_variance(diff, 0.0))


def click_sums(stats: dict[str, Any] | None, rates: Rates) -> RunningValue:
    """The click sums of a challenger's or the champion's saved stats (none yet: zeros).
    Stats saved before the sums kept clicks added ``h(f)``: mapped back at ``rates``
    (exact when the rates have not changed since)."""
    value = RunningValue((stats or {}).get("sums"))
    if value.n and (stats or {}).get("reward") != CLICK_SUMS:
        rho0, rho1 = check_noise_rates(rates.rho0, rates.rho1)
        value.sums = _affine(value.sums, 1.0 - rho0 - rho1, rho0)
    return value


@dataclass(frozen=True)
class ShownValue:
    """A champion's or a challenger's value as it is shown (``GET .../challengers`` and the
    gauges alike): its events and its estimates at the rates read, each interval rounded
    (:meth:`Interval.rounded`)."""

    events: int
    champion: Interval
    """The logged plays' mean reward on these events (the champion's value)."""
    snips: Interval
    """A challenger's value."""
    ips: Interval
    vs_champion: Interval
    """SNIPS minus the champion's value on the same events."""


def shown_value(stats: dict[str, Any] | None, rates: Rates, level: float = LEVEL) -> ShownValue:
    """The value of saved stats (:func:`click_sums`) read at ``rates``, their errors in the
    intervals: the one rule by which a champion's or challenger's value is shown."""
    value = click_sums(stats, rates).corrected(rates)
    return ShownValue(value.n, value.champion(level).rounded(), value.snips(level).rounded(),
                      value.ips(level).rounded(), value.snips_minus_champion(level).rounded())


def logged_propensity(batch: Any) -> np.ndarray | None:
    """The logged probability of each play: ``prob``, else ``exp(log_prob)``, else a slate's
    first placement (``probabilities`` per slot, slot 0); None when the log has none.

    A probability that is not positive (``exp`` of a very negative ``log_prob`` rounds to 0)
    is NaN: its weight is undefined, so the event is left out of the sums (an infinite weight
    made every later estimate NaN)."""
    if "prob" in batch:
        p = np.asarray(batch["prob"], dtype=float).reshape(-1)
    elif "log_prob" in batch:
        p = np.exp(np.asarray(batch["log_prob"], dtype=float).reshape(-1))
    elif "probabilities" in batch:
        p = np.asarray(batch["probabilities"], dtype=float)[:, 0]
    else:
        return None
    return np.where(p > 0, p, np.nan)


def logged_click(batch: Any) -> np.ndarray | None:
    """The observed click of each play: ``click``, else a slate's slot-0 value (``clicks``
    per slot; slot 0 is always shown and examined); None when the log has neither."""
    if "click" in batch:
        return np.asarray(batch["click"], dtype=float).reshape(-1)
    if "clicks" in batch:
        return np.asarray(batch["clicks"], dtype=float)[:, 0]
    return None


def match_weights(own_played: np.ndarray, logged_played: np.ndarray,
                  propensity: np.ndarray) -> np.ndarray:
    """``1[own play == logged play] / p_i`` per event (a play may be a set of labels: rows
    compared whole), the unbiased importance weight of a policy known by its draws."""
    n = len(propensity)
    same = np.all(np.asarray(own_played).reshape(n, -1) == np.asarray(logged_played).reshape(
        n, -1), axis=1)
    return same / propensity
