"""LinUCB with a full per-arm ridge regression, for small inputs (``linucb``).

Li, Chu, Langford & Schapire (2010), "A contextual-bandit approach to
personalized news article recommendation", Algorithm 1 (disjoint models),
learning raw clicks as the diagonal learners of :mod:`app.learners.ridge` do
(see that module for the noise handling).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    Batch,
    Decision,
    Event,
    ParamError,
    State,
    check_int,
    check_non_negative,
    check_positive,
    check_state,
)
from app.learners.forgetting import check_half_life, decay, discount
from app.learners.ridge import RidgeBandit, check_uniform_share


class LinUCB(RidgeBandit):
    """LinUCB with one full ridge regression per label (``linucb``).

    Arm ``a`` keeps the Gram matrix ``gram_[a] = sum x x^T`` and the vector
    ``sum_rx_[a] = sum click * x`` over the events where it was played, and
    the covariance ``cov_[a] = (lambda I + gram_[a])^{-1}``, so that

        theta_a    = cov_[a] @ sum_rx_[a]           (the ridge solution)
        mean_a(x)  = theta_a . x
        width_a(x) = sqrt(x^T cov_[a] x)

    and the played label is ``argmax_a mean_a(x) + alpha * width_a(x)``
    (ties to the lowest label), except on a ``uniform_share`` of the rounds,
    where it is drawn uniformly; the logged probability is the mixture's.  One
    event updates ``cov_`` by Sherman-Morrison,
    ``cov -= (cov x)(cov x)^T / (1 + x^T cov x)``, in ``O(d^2)``; a batch adds
    the Gram matrices of its events per arm and re-inverts the touched arms,
    which equals the sequential result up to rounding (the updates commute).

    The ridge strength ``lambda = ridge * ||x_1||^2`` is fixed by the first
    learned event ``x_1`` (``ridge`` if ``x_1 = 0``): a running estimate as in
    :class:`~app.learners.ridge.DiagRidge` would change every ``cov_`` and
    cost a re-inversion per event.  Memory and time per decision are
    ``O(K d^2)``, hence the ``max_features`` guard; use ``linucb_diag`` for
    large inputs.

    Forgetting (``half_life``, :mod:`app.learners.forgetting`): D-LinUCB
    (Russac et al. 2019, Algorithm 1) per arm, every event ageing every
    arm's ``gram_`` and ``sum_rx_`` by ``gamma`` and ``gram_sq_`` by
    ``gamma^2``; with ``V_a = lambda I + gram_[a]`` and
    ``V~_a = lambda I + gram_sq_[a]`` (aged to now)

        theta_a    = V_a^-1 sum_rx_[a]
        width_a(x) = sqrt(x^T V_a^-1 V~_a V_a^-1 x).

    An arm is aged lazily (``aged_at_[a]``), so ``V_a`` changes with every
    event even when the arm is not played and no inverse can be kept: a
    decision solves the ``K`` systems ``V_a z = x`` (``O(K d^3)``) and
    ``cov_`` is not kept.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of labels ``K``.
    seed:
        Seed of the uniform-exploration draws.
    alpha:
        Width of the optimism bonus, on the scale of the observed clicks.
        0 is greedy; larger values explore longer.  1 to 2 works untuned.
    ridge:
        Ridge strength relative to the squared norm of the first learned
        input.  Larger values shrink the means and keep exploring longer.
    uniform_share:
        Share of the rounds, in ``[0, 1)``, whose label is drawn uniformly at
        random (logged with its propensity), which the click-noise estimate
        is anchored on; 0 makes the policy deterministic.
    max_features:
        Largest ``n_features`` accepted (memory ``2 K d^2`` floats).
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more
        events; null never forgets.
    rho0, rho1:
        Click-noise rates, used only to report ``expected_reward``; updated by
        :meth:`set_noise_rates`.

    Attributes
    ----------
    gram_, cov_, sum_rx_:
        Per-arm Gram matrices, ridge covariances and click-weighted input sums
        (with forgetting: aged sums, ``gram_sq_`` and ``aged_at_`` beside them,
        no ``cov_``).
    lambda_:
        The ridge strength (0 until the first event).
    count_:
        Number of learned events.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = LinUCB(n_features=3, n_classes=2)
    >>> mistakes = []
    >>> for t in range(1000):
    ...     x = np.r_[rng.normal(size=2), 1.0]
    ...     d = model.decide(x)
    ...     click = float(d.output["label"] == int(x[0] > x[1]))
    ...     mistakes.append(1.0 - click)
    ...     model.learn_one({**d.context, "click": click})
    >>> float(np.mean(mistakes[-300:])) < 0.1
    True
    """

    paper = (
        "Li, Chu, Langford & Schapire 2010, *A Contextual-Bandit Approach to Personalized "
        "News Article Recommendation*, Algorithm 1 (disjoint LinUCB)"
    )

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None = None,
                 alpha: float = 1.0, ridge: float = 0.5, max_features: int = 200,
                 uniform_share: float = 0.05, half_life: float | None = None,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1)
        self.alpha = check_non_negative("alpha", alpha)
        self.ridge = check_positive("ridge", ridge)
        self.uniform_share = check_uniform_share(uniform_share)
        self.half_life = check_half_life(half_life)
        self._gamma = discount(self.half_life)
        self.max_features = check_int("max_features", max_features, 1, 4096)
        if self.n_features > self.max_features:
            raise ParamError("n_features", f"linucb keeps a {self.n_features}x{self.n_features} "
                             f"matrix per label; n_features must be <= max_features="
                             f"{self.max_features} (use linucb_diag for large inputs)")
        k, d = self.n_classes, self.n_features
        forgets = self.half_life is not None
        self.gram_ = np.zeros((k, d, d))
        # without forgetting the inverse; with it the gamma^2-aged Gram matrix (V~)
        self.cov_ = np.zeros((k, d, d)) if not forgets else np.zeros((0, d, d))
        self.gram_sq_ = np.zeros((k, d, d)) if forgets else np.zeros((0, d, d))
        self.aged_at_ = np.zeros(k if forgets else 0, dtype=np.int64)
        self.sum_rx_ = np.zeros((k, d))
        self.lambda_ = 0.0  # Python scalars; arrays in get_state
        self.count_ = 0

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``gram_`` and ``cov_`` (``K d^2`` floats each), ``sum_rx_``, ``lambda_``, ``count_``;
        with a ``half_life``, ``gram_sq_`` in place of ``cov_`` and ``aged_at_`` (``K``)."""
        k, d = n_classes or 0, n_features
        forgets = params.get("half_life") is not None
        return ITEM_BYTES * (2 * k * d * d + k * d + 2 + (k if forgets else 0))

    def coefficients(self) -> np.ndarray:
        """The ridge solutions ``theta_a`` as rows of a ``(K, d)`` array."""
        if self.half_life is not None:
            age = self._ages()
            aged: np.ndarray = np.linalg.solve(self._precisions(age),
                                               age[:, None] * self.sum_rx_)
            return aged
        theta: np.ndarray = np.einsum("kij,kj->ki", self.cov_, self.sum_rx_)
        return theta

    def _ages(self) -> np.ndarray:
        """Per arm, the weight ``gamma^(count_ - aged_at_)`` its sums take to be aged to now."""
        return decay(self._gamma, self.count_ - self.aged_at_)

    def _precisions(self, age: np.ndarray) -> np.ndarray:
        """``V_a = lambda I + gram_[a]`` aged by ``age`` (forgetting; class docstring)."""
        v: np.ndarray = age[:, None, None] * self.gram_
        v += self.lambda_ * np.eye(self.n_features)
        return v

    def _estimate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.count_ == 0:
            return np.zeros(self.n_classes), np.zeros(self.n_classes)
        if self.half_life is not None:
            age = self._ages()
            z = np.linalg.solve(self._precisions(age), np.broadcast_to(
                x[:, None], (self.n_classes, self.n_features, 1)))[..., 0]  # V_a^-1 x
            spread = self.lambda_ * np.einsum("kj,kj->k", z, z) + age * age * np.einsum(
                "kj,kij,ki->k", z, self.gram_sq_, z)  # z^T V~ z
            return age * np.einsum("kj,kj->k", z, self.sum_rx_), np.sqrt(np.maximum(spread, 0.0))
        cx = self.cov_ @ x  # (K, d); cov_ is symmetric, so cx[a] . b_a = theta_a . x
        return np.einsum("kj,kj->k", cx, self.sum_rx_), np.sqrt(np.maximum(cx @ x, 0.0))

    def _start(self, x: np.ndarray) -> None:
        """Fix ``lambda`` from the first learned input and set every ``cov_`` to ``I/lambda``."""
        norm2 = float(x @ x)
        self.lambda_ = self.ridge * (norm2 if norm2 > 0.0 else 1.0)
        if self.half_life is None:
            self.cov_[:] = np.eye(self.n_features) / self.lambda_

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        return self._decide_ucb(x, explore, self.alpha, self.uniform_share)

    def learn_one(self, event: Event) -> None:
        x, played, click = self._check_event(event)
        if self.count_ == 0:
            self._start(x)
        if self.half_life is not None:
            self._add(played, x[None], np.array([click]), np.array([self.count_ + 1]))
            self.count_ += 1
            return
        cov = self.cov_[played]
        cx = cov @ x
        cov -= np.outer(cx, cx / (1.0 + x @ cx))
        self.gram_[played] += np.outer(x, x)
        self.sum_rx_[played] += click * x
        self.count_ += 1

    def _add(self, arm: int, X: np.ndarray, click: np.ndarray, at: np.ndarray) -> None:
        """Add events of one arm learned at the counts ``at`` (increasing), with forgetting:
        the arm's sums aged to the last of them, each event weighted by its own age."""
        now = at[-1]
        old = float(decay(self._gamma, np.array(now - self.aged_at_[arm])))
        w = decay(self._gamma, now - at)
        self.gram_[arm] = old * self.gram_[arm] + (X * w[:, None]).T @ X
        self.gram_sq_[arm] = old * old * self.gram_sq_[arm] + (X * (w * w)[:, None]).T @ X
        self.sum_rx_[arm] = old * self.sum_rx_[arm] + (w * click) @ X
        self.aged_at_[arm] = now

    def learn_many(self, batch: Batch) -> None:
        """Add the batch's Gram matrices per arm and re-invert the touched arms."""
        X, played, click = self._check_batch(batch)
        if X.shape[0] == 0:
            return
        if self.count_ == 0:
            self._start(X[0])
        if self.half_life is not None:
            at = self.count_ + 1 + np.arange(X.shape[0])
            for arm in np.unique(played):
                mine = played == arm
                self._add(int(arm), X[mine], click[mine], at[mine])
            self.count_ += X.shape[0]
            return
        np.add.at(self.sum_rx_, played, click[:, None] * X)
        eye = np.eye(self.n_features)
        for arm in np.unique(played):
            rows = X[played == arm]
            self.gram_[arm] += rows.T @ rows
            self.cov_[arm] = np.linalg.inv(self.lambda_ * eye + self.gram_[arm])
        self.count_ += X.shape[0]

    def get_state(self) -> State:
        state = {
            "gram_": self.gram_.copy(),
            "cov_": self.cov_.copy(),
            "sum_rx_": self.sum_rx_.copy(),
            "lambda_": np.array(self.lambda_),
            "count_": np.array(self.count_, dtype=np.int64),
        }
        if self.half_life is not None:
            del state["cov_"]
            state |= {"gram_sq_": self.gram_sq_.copy(), "aged_at_": self.aged_at_.copy()}
        return state

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        if checked["lambda_"] < 0.0 or checked["count_"] < 0 or (
                checked["count_"] > 0 and checked["lambda_"] == 0.0):
            raise ParamError("state", "lambda_ must be positive once events were learned")
        if self.half_life is not None:
            if np.any(checked["aged_at_"] < 0) or np.any(checked["aged_at_"] > checked["count_"]):
                raise ParamError("state", "aged_at_ must lie in [0, count_]")
            self.gram_sq_, self.aged_at_ = checked["gram_sq_"], checked["aged_at_"]
        else:
            self.cov_ = checked["cov_"]
        self.gram_ = checked["gram_"]
        self.sum_rx_ = checked["sum_rx_"]
        self.lambda_, self.count_ = float(checked["lambda_"]), int(checked["count_"])
