"""What the learners of the ``continuous`` task share: the smoothed policy and its rewards.

A learner of the ``continuous`` task picks a centre ``c`` in the action range ``[lo, hi]``
(its greedy or optimistic action) and plays the *smoothed* policy around it (Majzoubi,
Zhang, Chari, Krishnamurthy, Langford & Slivkins 2020, "Efficient Contextual Bandits with
Continuous Actions", Section 2, the smoothing operator with an ``epsilon`` share of uniform
exploration): with probability ``epsilon`` an action uniform over the range, else one
uniform over the window ``W(c) = [c - h, c + h]`` clipped to the range.  Its density is

    pdf(a | c) = epsilon / (hi - lo) + (1 - epsilon) * 1[a in W(c)] / |W(c)|

which every decision logs (for learning and for off-policy evaluation).

Rewards.  Feedback is a reward (a number) or a click worth ``click_value`` (a purchase at a
price: its revenue).  A learner sees ``reward`` (for a click, ``click_value * click``) and
``click_value`` (NaN for a plain reward); a click is noise-corrected with the model's rates
by the label task's rule (P1 Lemma 1, :func:`app.learners.proxy.unbiased_click`),

    r = click_value * (click - rho0) / (1 - rho0 - rho1),

whose expectation is ``click_value`` times the true click probability.  The correction is
not a monotone map of the learned reward when ``click_value`` varies with the action (the
revenue ``price * P(purchase | price)`` observed through noisy purchases gains
``price * rho0``, which pulls an uncorrected learner toward high prices).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from app.learners.base import (
    Batch,
    Decision,
    Event,
    Learner,
    ParamError,
    check_int,
    check_positive,
    check_range,
)
from app.learners.proxy import check_noise_rates

#: The action range of a model that names none.
DEFAULT_RANGE = (0.0, 1.0)
#: Fields a decision logs (with ``x``): the played action, its density, the greedy action.
ACTION_FIELDS = ("action", "pdf", "greedy")


def check_action_range(value: Sequence[float]) -> tuple[float, float]:
    """``(lo, hi)`` with finite ``lo < hi``, else :class:`ParamError` naming ``action_range``.

    >>> check_action_range([0, 10])
    (0.0, 10.0)
    """
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ParamError("action_range", f"must be two numbers [lo, hi], got {value!r:.80}"
                         ) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ParamError("action_range", f"must be finite with lo < hi, got [{lo}, {hi}]")
    return lo, hi


def window(center: float | np.ndarray, lo: float, hi: float, h: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """The smoothing window ``[c - h, c + h]`` clipped to ``[lo, hi]``: its ends."""
    return np.maximum(lo, np.asarray(center) - h), np.minimum(hi, np.asarray(center) + h)


def smoothed_pdf(action: float | np.ndarray, center: float | np.ndarray, lo: float, hi: float,
                 h: float, epsilon: float) -> np.ndarray:
    """Density of ``action`` under the smoothed policy around ``center`` (module docstring).

    >>> round(float(smoothed_pdf(0.5, 0.5, 0.0, 1.0, 0.1, 0.2)), 12)  # 0.2 + 0.8 / 0.2
    4.2
    >>> round(float(smoothed_pdf(0.0, 0.0, 0.0, 1.0, 0.1, 0.2)), 12)  # window [0, 0.1]
    8.2
    """
    a, b = window(center, lo, hi, h)
    inside = (np.asarray(action) >= a) & (np.asarray(action) <= b)
    pdf: np.ndarray = epsilon / (hi - lo) + (1.0 - epsilon) * inside / (b - a)
    return pdf


def draw_smoothed(u: np.ndarray, center: np.ndarray, lo: float, hi: float, h: float,
                  epsilon: float) -> np.ndarray:
    """Actions of the smoothed policy around each ``center``, from two uniforms per row of
    ``u`` (``n x 2``): the first picks exploration (below ``epsilon``), the second the place
    in the range or in the window.

    >>> draw_smoothed(np.array([[0.5, 0.5], [0.1, 0.5]]), np.array([0.9, 0.9]), 0.0, 1.0,
    ...               0.2, 0.2).round(12)  # the window is [0.7, 1]; uniform over [0, 1]
    array([0.85, 0.5 ])
    """
    a, b = window(center, lo, hi, h)
    out: np.ndarray = np.where(u[:, 0] < epsilon, lo + u[:, 1] * (hi - lo),
                               a + u[:, 1] * (b - a))
    return out


class ContinuousBandit(Learner):
    """Shared parts of the ``continuous`` learners: range, smoothing, noise rates, events.

    A subclass gives :meth:`centres` (the greedy and the played centre of an input) and
    :meth:`_learn` (learn checked columns); this class draws, logs and corrects rewards.
    """

    task: ClassVar[str] = "continuous"
    feedback_fields: ClassVar[tuple[str, ...]] = ("reward", "click_value")
    logged_only: ClassVar[bool] = True
    uses_noise_rates: ClassVar[bool] = True
    exploration_param: ClassVar[str | None] = "epsilon"

    def __init__(self, *, n_features: int, seed: int | None, action_range: Sequence[float],
                 bandwidth: float | None, epsilon: float, rho0: float, rho1: float) -> None:
        self.n_features = check_int("n_features", n_features, 1)
        self.action_range = check_action_range(action_range)
        self.bandwidth = None if bandwidth is None else check_positive("bandwidth", bandwidth)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0)
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    @property
    @abstractmethod
    def half_width(self) -> float:
        """The smoothing bandwidth ``h`` in action units (subclasses give the default)."""

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)

    def _inputs(self, X: np.ndarray) -> np.ndarray:
        """``Z = [1, X]``: the inputs (rows of ``n_features``) with an intercept."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ParamError("features", f"expected rows of {self.n_features} features, "
                                         f"got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ParamError("features", "contains non-finite values")
        return np.hstack([np.ones((X.shape[0], 1)), X])

    @abstractmethod
    def centres(self, Z: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(greedy, centre)`` actions per row of ``Z`` (inputs with their intercept)."""

    def pdf(self, action: float | np.ndarray, center: float | np.ndarray) -> np.ndarray:
        """The smoothed policy's density of ``action`` around ``center``."""
        lo, hi = self.action_range
        return smoothed_pdf(action, center, lo, hi, self.half_width, self.epsilon)

    def decide_contexts(self, X: np.ndarray, explore: bool = True) -> Batch:
        """Per row of ``X``: the greedy action, and with ``explore`` an action drawn from the
        smoothed policy around the learner's centre (:func:`draw_smoothed`, two uniforms a
        row, in row order), with its density ``pdf``; without ``explore`` the greedy action
        is played (``pdf``: its density under the smoothed policy; no draw is made)."""
        Z = self._inputs(X)
        greedy, centre = self.centres(Z, explore)
        action = greedy
        if explore:
            lo, hi = self.action_range
            action = draw_smoothed(self._rng.random((Z.shape[0], 2)), centre, lo, hi,
                                   self.half_width, self.epsilon)
        return {"x": Z[:, 1:], "action": action, "pdf": self.pdf(action, centre),
                "greedy": greedy}

    def decide_many(self, X: np.ndarray, explore: bool = True) -> list[Decision]:
        columns = self.decide_contexts(X, explore)
        return [Decision({"action": float(a), "pdf": float(p), "greedy_action": float(g)},
                         {"x": x, "action": a, "pdf": p, "greedy": g})
                for x, a, p, g in zip(columns["x"], columns["action"], columns["pdf"],
                                      columns["greedy"], strict=True)]

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """:meth:`decide_contexts` of one input."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.n_features,):
            raise ParamError("features", f"expected shape ({self.n_features},), got {x.shape}")
        return self.decide_many(x[None, :], explore)[0]

    def rewards(self, reward: np.ndarray, click_value: np.ndarray) -> np.ndarray:
        """Rewards to learn: a plain reward as it is, a click noise-corrected (module
        docstring)."""
        clicked = ~np.isnan(click_value)
        value = np.where(clicked, click_value, 0.0)
        corrected = (reward - value * self.rho0) / (1.0 - self.rho0 - self.rho1)
        out: np.ndarray = np.where(clicked, corrected, reward)
        return out

    def _columns(self, batch: Batch | Event) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray]:
        """``(Z, action, pdf, r)`` of a batch (or one event as a batch of one), checked."""
        X = np.atleast_2d(np.asarray(batch["x"], dtype=np.float64))
        if X.shape[1:] != (self.n_features,) or not np.all(np.isfinite(X)):
            raise ParamError("x", f"expected finite rows of {self.n_features} features")
        action = np.atleast_1d(np.asarray(batch["action"], dtype=np.float64))
        pdf = np.atleast_1d(np.asarray(batch["pdf"], dtype=np.float64))
        reward = np.atleast_1d(np.asarray(batch["reward"], dtype=np.float64))
        value = np.atleast_1d(np.asarray(batch["click_value"], dtype=np.float64))
        lo, hi = self.action_range
        if not np.all((action >= lo) & (action <= hi)):
            raise ParamError("action", f"must lie in [{lo}, {hi}]")
        if not np.all(np.isfinite(pdf) & (pdf > 0)):
            raise ParamError("pdf", "must be finite and > 0")
        if not np.all(np.isfinite(reward)):
            raise ParamError("reward", "must be finite")
        if np.any(np.isinf(value)):
            raise ParamError("click_value", "must be finite (or NaN for a plain reward)")
        Z = np.hstack([np.ones((X.shape[0], 1)), X])
        return Z, action, pdf, self.rewards(reward, value)

    def learn_one(self, event: Event) -> None:
        self._learn(*self._columns(event))

    def learn_many(self, batch: Batch) -> None:
        if batch:
            self._learn(*self._columns(batch))

    @abstractmethod
    def _learn(self, Z: np.ndarray, action: np.ndarray, pdf: np.ndarray,
               r: np.ndarray) -> None:
        """Learn from checked columns: inputs ``Z`` (with the intercept), played actions,
        their densities and the rewards to learn."""
