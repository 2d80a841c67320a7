"""Click-noise rates per slot and their standard errors, as the evaluations correct by them.

A ranking's click in slot ``k`` follows the trust-bias click model of
:mod:`app.learners.noise_slots` (Agarwal et al. WWW 2019; Vardasbi et al.
CIKM 2020),

    P(f = 1 | k, R) = theta_k (R (1 - rho1) + (1 - R) rho0_k) = beta_k + alpha_k R,

so the affine correction ``r = (f - beta_k) / alpha_k`` has mean ``R``, the
true relevance of what is placed in slot ``k``: the reward the estimators
use (``alpha``, ``beta`` by :func:`~app.learners.noise_slots.click_affine`,
the formula the learner corrects its clicks with).  The label task's rates
``rho0, rho1`` are the case of one slot with ``theta = 1``:
``r = h(f) = (f - rho0) / (1 - rho0 - rho1)``.  Rates of one slot apply to
every slot (:meth:`SlotRates.scalar`).

**Uncertain rates.**  With standard errors, each bootstrap resample ``b``
draws ``theta_kb``, ``rho0_kb`` and ``rho1_b`` from normals around the rates
(one ``rho1_b`` for all slots), clipped to ``[0, 1]`` with ``theta_kb`` and
``1 - rho0_kb - rho1_b`` at least :data:`~app.learners.proxy.BETA_FLOOR`
(:meth:`SlotRates.resampling`).  No refit is needed: with the drawn
``alpha_kb, beta_kb``, ``r_b = a_kb r + c_kb`` where ``a_kb = alpha_k / alpha_kb``
and ``c_kb = (beta_k - beta_kb) / alpha_kb``, which the estimators apply to
their sums (:mod:`app.evaluation.estimators`).  The draws are independent:
the per-slot estimate publishes marginal intervals only, and as its
``theta_k = u_k / u_0`` and ``rho1 = 1 - u_0`` share ``u_0`` (and
``rho0_k = v_k / theta_k`` shares ``theta_k``), independent draws give
``alpha_k = u_k - v_k`` and ``beta_k = v_k`` more spread than they have: the
intervals err wide.  Pure numpy.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from app.learners.noise_slots import click_affine
from app.learners.proxy import BETA_FLOOR, check_noise_rates

#: The reward of rates of one slot with ``theta = 1`` (the label task's).
SCALAR_REWARD = "h(f) = (f - rho0) / (1 - rho0 - rho1)"
#: The reward of per-slot rates.
SLOT_REWARD = "(f - theta_k rho0_k) / (theta_k (1 - rho0_k - rho1)) in slot k"
#: How the rates of a resample are drawn.
DRAWS = "each bootstrap resample draws rho ~ N(rho, se), clipped to [0, 1]"


@dataclass(frozen=True)
class SlotRates:
    """Per-slot examination ``theta``, click noise ``rho0`` (one per slot) and ``rho1``, and
    their standard errors; one slot applies to every slot (module docstring)."""

    theta: tuple[float, ...]
    rho0: tuple[float, ...]
    rho1: float
    theta_se: tuple[float, ...]
    rho0_se: tuple[float, ...]
    rho1_se: float = 0.0

    def __post_init__(self) -> None:
        m = len(self.theta)
        if m == 0 or not len(self.rho0) == len(self.theta_se) == len(self.rho0_se) == m:
            raise ValueError("theta, rho0 and their standard errors need one entry per slot")
        spread = np.array([*self.theta_se, *self.rho0_se, self.rho1_se], dtype=np.float64)
        if not (np.isfinite(spread).all() and spread.min() >= 0.0):
            raise ValueError("rate standard errors must be finite and >= 0")
        if not all(0.0 < t <= 1.0 for t in self.theta):
            raise ValueError(f"theta must lie in (0, 1], got {list(self.theta)}")
        for rho0 in self.rho0:
            check_noise_rates(rho0, self.rho1)

    @classmethod
    def scalar(cls, rho0: float, rho1: float, rho0_se: float = 0.0,
               rho1_se: float = 0.0) -> SlotRates:
        """The label task's rates: one slot, ``theta = 1``, applied to every slot."""
        return cls((1.0,), (float(rho0),), float(rho1), (0.0,), (float(rho0_se),),
                   float(rho1_se))

    @classmethod
    def from_slots(cls, slots: Sequence[Mapping[str, Any]], level: float = 0.95) -> SlotRates:
        """The rates of the ``slots`` of ``GET /v1/models/{id}/noise`` (per slot ``theta``,
        ``rho0``, ``rho1`` and, optionally, their ``interval`` at ``level``), in slot order;
        each standard error is the wider half of its interval over ``z``.

        >>> rates = SlotRates.from_slots([
        ...     {"slot": 0, "theta": 1.0, "rho0": 0.2, "rho1": 0.1},
        ...     {"slot": 1, "theta": 0.6, "rho0": 0.1, "rho1": 0.1,
        ...      "interval": {"theta": [0.5, 0.7], "rho0": [0.05, 0.15], "rho1": [0.1, 0.1]}}])
        >>> rates.theta, [round(se, 4) for se in rates.theta_se]
        ((1.0, 0.6), [0.0, 0.051])
        """
        if not slots:
            raise ValueError("slots: no per-slot rates (is the estimate published?)")
        if not all(all((s.get("published") or {}).get(name, True) for name in ("rho0", "rho1"))
                   for s in slots):
            raise ValueError("slots: the per-slot estimate's rates are not published (its "
                             "values are shown flagged, not to be used)")
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        rows = sorted(slots, key=lambda s: int(s.get("slot", 0)))

        def se(row: Mapping[str, Any], name: str) -> float:
            low, high = (row.get("interval") or {}).get(name) or (row[name], row[name])
            return max(float(high) - float(row[name]), float(row[name]) - float(low)) / z

        try:
            return cls(tuple(float(s["theta"]) for s in rows),
                       tuple(float(s["rho0"]) for s in rows), float(rows[0]["rho1"]),
                       tuple(se(s, "theta") for s in rows), tuple(se(s, "rho0") for s in rows),
                       se(rows[0], "rho1"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"slots: each needs theta, rho0 and rho1 ({exc!r})") from None

    @classmethod
    def from_json(cls, document: Any) -> SlotRates:
        """The rates of a ``GET /v1/models/{id}/noise`` response (its ``slots``, at its
        ``interval.level``) or of its ``slots`` list alone."""
        if isinstance(document, list):
            return cls.from_slots(document)
        if not isinstance(document, dict) or "slots" not in document:
            raise ValueError("expected the JSON of GET /v1/models/{id}/noise or its slots")
        if not document["slots"]:
            raise ValueError(f"no published per-slot estimate (status "
                             f"{document.get('status')!r}, reason {document.get('reason')!r})")
        level = (document.get("interval") or {}).get("level") or 0.95
        return cls.from_slots(document["slots"], float(level))

    @property
    def slots(self) -> int:
        return len(self.theta)

    @property
    def uncertain(self) -> bool:
        """Whether any rate has a standard error."""
        return any(self.theta_se) or any(self.rho0_se) or self.rho1_se > 0.0

    def slot(self, k: int) -> SlotRates:
        """The rates of slot ``k`` alone (all of them for rates of one slot)."""
        if self.slots == 1:
            return self
        return SlotRates((self.theta[k],), (self.rho0[k],), self.rho1, (self.theta_se[k],),
                         (self.rho0_se[k],), self.rho1_se)

    def for_slots(self, m: int) -> SlotRates:
        """The rates of slots ``0 .. m - 1`` (ValueError when they cover fewer)."""
        if self.slots == 1:
            return self
        if self.slots < m:
            raise ValueError(f"the rates cover {self.slots} slots; the log shows {m}")
        return SlotRates(self.theta[:m], self.rho0[:m], self.rho1, self.theta_se[:m],
                         self.rho0_se[:m], self.rho1_se)

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha_k, beta_k)`` per slot."""
        return click_affine(np.array(self.theta), np.array(self.rho0), self.rho1)

    def correct(self, f: np.ndarray) -> np.ndarray:
        """``(f - beta_k) / alpha_k``: ``f`` one column per slot (or any shape, for rates of
        one slot)."""
        if self.slots != 1 and (f.ndim != 2 or f.shape[1] != self.slots):
            raise ValueError(f"per-slot rates of {self.slots} slots correct clicks of as many "
                             f"slots, got shape {f.shape}")
        alpha, beta = self.affine()
        out: np.ndarray = (f.astype(np.float64) - beta) / alpha
        return out

    def resampling(self, n_boot: int, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray] | None:
        """Per resample and slot, ``(a_b, c_b)`` (``n_boot x slots``) with
        ``r_b = a_b r + c_b`` for rates drawn around these (module docstring); None
        without standard errors."""
        if not self.uncertain:
            return None
        m = self.slots
        rates = np.clip(rng.normal([*self.rho0, self.rho1], [*self.rho0_se, self.rho1_se],
                                   size=(n_boot, m + 1)), 0.0, 1.0)
        theta = np.array(self.theta)
        if any(self.theta_se):
            theta = np.clip(rng.normal(theta, self.theta_se, size=(n_boot, m)), BETA_FLOOR, 1.0)
        alpha_b, beta_b = click_affine(theta, rates[:, :m], rates[:, m:])
        alpha_b = np.maximum(alpha_b, theta * BETA_FLOOR)
        alpha, beta = self.affine()
        return alpha / alpha_b, (beta - beta_b) / alpha_b

    def interval(self, low: float, high: float, z: float) -> tuple[float, float]:
        """An interval ``[low, high]`` of the click rate of one slot's rates as one of
        relevance: mapped through ``(f - beta) / alpha`` at every corner of the rates'
        ``+- z se`` ranges (clipped as the draws are), its least and greatest ends (the
        map is monotone in each rate, so the corners hold them)."""
        if self.slots != 1:
            raise ValueError("an interval of one slot's click rate needs that slot's rates")
        ends = []
        for a, b, c in itertools.product((-1.0, 0.0, 1.0), repeat=3):
            theta = min(max(self.theta[0] + a * z * self.theta_se[0], BETA_FLOOR), 1.0)
            rho0 = min(max(self.rho0[0] + b * z * self.rho0_se[0], 0.0), 1.0)
            rho1 = min(max(self.rho1 + c * z * self.rho1_se, 0.0), 1.0)
            if rho0 + rho1 < 1.0:
                alpha, beta = click_affine(np.array(theta), np.array(rho0), rho1)
                ends.append(((low - beta) / alpha, (high - beta) / alpha))
        return float(min(e[0] for e in ends)), float(max(e[1] for e in ends))

    def correction(self) -> dict[str, Any]:
        """The correction applied, JSON-ready: ``reward``, the rates and, with standard
        errors, ``rate_uncertainty``."""
        one = self.slots == 1
        if one and self.theta == (1.0,) and not self.theta_se[0]:
            out: dict[str, Any] = {"reward": SCALAR_REWARD, "rho0": self.rho0[0],
                                   "rho1": self.rho1}
            spread: dict[str, Any] = {"rho0_se": self.rho0_se[0], "rho1_se": self.rho1_se}
        else:
            out = {"reward": SLOT_REWARD, "theta": list(self.theta), "rho0": list(self.rho0),
                   "rho1": self.rho1}
            spread = {"theta_se": list(self.theta_se), "rho0_se": list(self.rho0_se),
                      "rho1_se": self.rho1_se}
        if self.uncertain:
            out["rate_uncertainty"] = {**spread, "draws": DRAWS}
        return out


def noise_rates(rho0: float | None, rho1: float | None, rho0_se: float = 0.0,
                rho1_se: float = 0.0, slot_rates: SlotRates | None = None
                ) -> SlotRates | None:
    """The rates an evaluation corrects by: ``slot_rates``, or the scalar ``rho0, rho1`` (with
    their standard errors), or None (no correction); ValueError for what cannot be used."""
    if min(rho0_se, rho1_se) < 0 or not np.isfinite(rho0_se + rho1_se):
        raise ValueError("rho0_se and rho1_se must be finite and >= 0")
    if slot_rates is not None:
        if rho0 is not None or rho1 is not None or rho0_se or rho1_se:
            raise ValueError("give rho0 and rho1 or per-slot rates, not both")
        return slot_rates
    if rho0 is None and rho1 is None:
        if rho0_se or rho1_se:
            raise ValueError("rho0_se and rho1_se need rho0 and rho1")
        return None
    if rho0 is None or rho1 is None:
        raise ValueError("give both rho0 and rho1 (or neither)")
    r0, r1 = check_noise_rates(rho0, rho1)
    return SlotRates.scalar(r0, r1, rho0_se, rho1_se)


def corrected(f: np.ndarray, rates: SlotRates | None) -> tuple[np.ndarray, dict[str, Any]]:
    """The reward the estimators use and the correction applied: ``f`` corrected by
    ``rates``, or ``f`` itself without rates."""
    return (f.astype(np.float64) if rates is None else rates.correct(f)), correction_of(rates)


def correction_of(rates: SlotRates | None) -> dict[str, Any]:
    """The correction ``rates`` apply, JSON-ready (:meth:`SlotRates.correction`; none without
    rates)."""
    if rates is None:
        return {"reward": "f (no noise correction)", "rho0": None, "rho1": None}
    return rates.correction()
