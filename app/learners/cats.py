"""CATS-style continuous-action bandit with per-bin linear reward models (``cats``).

Majzoubi, Zhang, Chari, Krishnamurthy, Langford & Slivkins (2020), "Efficient Contextual
Bandits with Continuous Actions" (NeurIPS), Algorithm 1 (CATS): the range is cut into
``K`` bins; the policy picks a bin centre and plays the smoothed policy around it
(:mod:`app.learners.smoothing`); each logged action teaches every bin whose smoothing window
holds it, with the smoothed importance weight of Section 3,

    w_k = (1[|a - c_k| <= h] / |W(c_k)|) / pdf(a),

an unbiased estimate of the smoothed policy's value at centre ``c_k``.  CATS learns the
argmax with a tree of cost-sensitive classifiers (``O(log K)`` per decision); here each bin
``k`` keeps a ridge regression of the reward on ``z = [1, x]`` over the events in its window,

    theta_k = (lambda I + sum_i w_ik z_i z_i^T)^-1 sum_i w_ik r_i z_i,

and the greedy centre is the direct ``argmax_k theta_k . z``: ``K (d + 1)`` multiply-adds a
decision.  At the ``K = 32`` of the paper's experiments no tree is needed: on the pricing
world, deciding and learning in batches of ten, this learner makes about four times as
many rounds per CPU second as Vowpal Wabbit's ``--cats 32`` tree (``bench/bench_continuous.py``,
``docs/continuous.md``).

The weights ``w_ik`` are the importance weights above with ``weighted``, else
``1[|a - c_k| <= h]`` (the default, a direct regression on the window's events): on the
pricing world (:mod:`app.sim.pricing`, 20,000 rounds, seeds 2 and 3) the importance
weights, up to ``(hi - lo) / (2 h epsilon)`` for an exploring action, closed 0.62 to 0.66
of the gap online against 0.87 to 0.88 without (0.28 to 0.33 against 0.82 to 0.85 with
noisy purchases).  The direct regression is biased where the logged actions are not
uniform over a window (around the greedy centre); it is the better learner of its own
decisions, and ``weighted`` the one for a log of another policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    ParamError,
    State,
    check_int,
    check_positive,
    check_state,
    size_param,
)
from app.learners.forgetting import check_half_life, decay, discount
from app.learners.smoothing import DEFAULT_RANGE, ContinuousBandit, window

#: Largest input accepted: the state holds ``K (d + 1)^2`` numbers.
MAX_FEATURES = 256


class CATS(ContinuousBandit):
    """CATS-style smoothed policy over ``bins`` centres, greedy by per-bin ridge regressions.

    Parameters
    ----------
    n_features:
        Input dimension ``d`` (at most :data:`MAX_FEATURES`).
    seed:
        Seed of the draws.
    action_range:
        ``[lo, hi]``, the actions.
    bins:
        ``K``, the centres ``c_k = lo + (k + 1/2) (hi - lo) / K``.
    bandwidth:
        Smoothing half-width ``h`` in action units; None: two bins, ``2 (hi - lo) / K``.
    epsilon:
        Share of actions drawn uniformly over the range.
    ridge:
        ``lambda`` of every bin's regression.
    weighted:
        Weigh each event by its smoothed importance weight (module docstring).
    half_life:
        Forgetting, in events: every bin's sums weigh an event learned ``s`` events ago by
        ``gamma^s``, ``gamma = 2^(-1 / half_life)`` (:mod:`app.learners.forgetting`), so
        that the bins follow a world whose reward curve moves; None never forgets.
    rho0, rho1:
        Click-noise rates (a click's reward is corrected with them).

    Attributes
    ----------
    gram_ : ndarray of shape (K, d + 1, d + 1)
        ``sum_i w_ik z_i z_i^T`` per bin.
    sum_rz_ : ndarray of shape (K, d + 1)
        ``sum_i w_ik r_i z_i`` per bin.

    Examples
    --------
    The best action is ``0.2 + 0.6 x`` (the reward ``a (0.4 + 1.2 x) - a^2`` is flat
    around it: 0.09 instead of 0.2 loses 0.012):

    >>> rng = np.random.default_rng(0)
    >>> learner = CATS(n_features=1, bins=16, seed=0)
    >>> for _ in range(3000):
    ...     x = rng.random(1)
    ...     d = learner.decide(x)
    ...     a = d.output["action"]
    ...     r = a * (0.4 + 1.2 * x[0]) - a * a + 0.1 * rng.standard_normal()
    ...     learner.learn_one({**d.context, "reward": r, "click_value": np.nan})
    >>> [round(learner.decide(np.array([x]), explore=False).output["action"], 2)
    ...  for x in (0.0, 1.0)]
    [0.09, 0.84]
    """

    paper: ClassVar[str] = ("Majzoubi, Zhang, Chari, Krishnamurthy, Langford & Slivkins 2020, "
                            "Efficient Contextual Bandits with Continuous Actions, Algorithm 1 "
                            "(per-bin ridge regressions for the tree)")

    def __init__(self, n_features: int, seed: int | None = None,
                 action_range: Sequence[float] = DEFAULT_RANGE, bins: int = 32,
                 bandwidth: float | None = None, epsilon: float = 0.05, ridge: float = 1.0,
                 weighted: bool = False, half_life: float | None = None, rho0: float = 0.0,
                 rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, seed=seed, action_range=action_range,
                         bandwidth=bandwidth, epsilon=epsilon, rho0=rho0, rho1=rho1)
        if self.n_features > MAX_FEATURES:
            raise ParamError("n_features", f"cats keeps K (d + 1)^2 numbers: at most "
                                           f"{MAX_FEATURES} features")
        self.bins = check_int("bins", bins, 2, 4096)
        self.ridge = check_positive("ridge", ridge)
        self.weighted = bool(weighted)
        self.half_life = check_half_life(half_life)
        self._gamma = discount(self.half_life)
        lo, hi = self.action_range
        self.centers = lo + (np.arange(self.bins) + 0.5) * (hi - lo) / self.bins
        dim = self.n_features + 1
        self.gram_ = np.zeros((self.bins, dim, dim))
        self.sum_rz_ = np.zeros((self.bins, dim))
        self._theta: np.ndarray | None = None

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``gram_`` and ``sum_rz_``: ``K (d + 1) (d + 2)`` floats."""
        k, dim = size_param(params, "bins"), n_features + 1
        return ITEM_BYTES * k * dim * (dim + 1)

    @property
    def half_width(self) -> float:
        lo, hi = self.action_range
        return self.bandwidth if self.bandwidth is not None else 2.0 * (hi - lo) / self.bins

    def theta(self) -> np.ndarray:
        """Every bin's ridge solution (class docstring), kept until the next update."""
        if self._theta is None:
            eye = self.ridge * np.eye(self.gram_.shape[1])
            self._theta = np.linalg.solve(self.gram_ + eye, self.sum_rz_[..., None])[..., 0]
        return self._theta

    def centres(self, Z: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """The greedy bin's centre per row, played smoothed (the paper's exploration)."""
        best: np.ndarray = self.centers[np.argmax(Z @ self.theta().T, axis=1)]
        return best, best

    def _learn(self, Z: np.ndarray, action: np.ndarray, pdf: np.ndarray,
               r: np.ndarray) -> None:
        w = (np.abs(action[:, None] - self.centers[None, :]) <= self.half_width).astype(float)
        if self.weighted:
            lo, hi = self.action_range
            a, b = window(self.centers, lo, hi, self.half_width)
            w = w / (b - a)[None, :] / pdf[:, None]
        if self.half_life is not None:
            n = len(r)
            w = w * decay(self._gamma, np.arange(n - 1, -1, -1))[:, None]  # gamma^(events after)
            whole = float(decay(self._gamma, np.array(n)))
            self.gram_ *= whole
            self.sum_rz_ *= whole
        self.gram_ += np.einsum("nk,nd,ne->kde", w, Z, Z)
        self.sum_rz_ += np.einsum("nk,n,nd->kd", w, r, Z)
        self._theta = None

    def get_state(self) -> State:
        return {"gram_": self.gram_.copy(), "sum_rz_": self.sum_rz_.copy()}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        self.gram_, self.sum_rz_ = checked["gram_"], checked["sum_rz_"]
        self._theta = None
