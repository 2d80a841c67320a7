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
    rho0, rho1:
        Click-noise rates, used only to report ``expected_reward``; updated by
        :meth:`set_noise_rates`.

    Attributes
    ----------
    gram_, cov_, sum_rx_:
        Per-arm Gram matrices, ridge covariances and click-weighted input sums.
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
                 uniform_share: float = 0.05, rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1)
        self.alpha = check_non_negative("alpha", alpha)
        self.ridge = check_positive("ridge", ridge)
        self.uniform_share = check_uniform_share(uniform_share)
        self.max_features = check_int("max_features", max_features, 1, 4096)
        if self.n_features > self.max_features:
            raise ParamError("n_features", f"linucb keeps a {self.n_features}x{self.n_features} "
                             f"matrix per label; n_features must be <= max_features="
                             f"{self.max_features} (use linucb_diag for large inputs)")
        k, d = self.n_classes, self.n_features
        self.gram_ = np.zeros((k, d, d))
        self.cov_ = np.zeros((k, d, d))
        self.sum_rx_ = np.zeros((k, d))
        self.lambda_ = 0.0  # Python scalars; arrays in get_state
        self.count_ = 0

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``gram_`` and ``cov_`` (``K d^2`` floats each), ``sum_rx_``, ``lambda_``, ``count_``."""
        k, d = n_classes or 0, n_features
        return ITEM_BYTES * (2 * k * d * d + k * d + 2)

    def coefficients(self) -> np.ndarray:
        """The ridge solutions ``theta_a`` as rows of a ``(K, d)`` array."""
        theta: np.ndarray = np.einsum("kij,kj->ki", self.cov_, self.sum_rx_)
        return theta

    def _estimate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.count_ == 0:
            return np.zeros(self.n_classes), np.zeros(self.n_classes)
        cx = self.cov_ @ x  # (K, d); cov_ is symmetric, so cx[a] . b_a = theta_a . x
        return np.einsum("kj,kj->k", cx, self.sum_rx_), np.sqrt(np.maximum(cx @ x, 0.0))

    def _start(self, x: np.ndarray) -> None:
        """Fix ``lambda`` from the first learned input and set every ``cov_`` to ``I/lambda``."""
        norm2 = float(x @ x)
        self.lambda_ = self.ridge * (norm2 if norm2 > 0.0 else 1.0)
        self.cov_[:] = np.eye(self.n_features) / self.lambda_

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        return self._decide_ucb(x, explore, self.alpha, self.uniform_share)

    def learn_one(self, event: Event) -> None:
        x, played, click = self._check_event(event)
        if self.count_ == 0:
            self._start(x)
        cov = self.cov_[played]
        cx = cov @ x
        cov -= np.outer(cx, cx / (1.0 + x @ cx))
        self.gram_[played] += np.outer(x, x)
        self.sum_rx_[played] += click * x
        self.count_ += 1

    def learn_many(self, batch: Batch) -> None:
        """Add the batch's Gram matrices per arm and re-invert the touched arms."""
        X, played, click = self._check_batch(batch)
        if X.shape[0] == 0:
            return
        if self.count_ == 0:
            self._start(X[0])
        np.add.at(self.sum_rx_, played, click[:, None] * X)
        eye = np.eye(self.n_features)
        for arm in np.unique(played):
            rows = X[played == arm]
            self.gram_[arm] += rows.T @ rows
            self.cov_[arm] = np.linalg.inv(self.lambda_ * eye + self.gram_[arm])
        self.count_ += X.shape[0]

    def get_state(self) -> State:
        return {
            "gram_": self.gram_.copy(),
            "cov_": self.cov_.copy(),
            "sum_rx_": self.sum_rx_.copy(),
            "lambda_": np.array(self.lambda_),
            "count_": np.array(self.count_, dtype=np.int64),
        }

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        if checked["lambda_"] < 0.0 or checked["count_"] < 0 or (
                checked["count_"] > 0 and checked["lambda_"] == 0.0):
            raise ParamError("state", "lambda_ must be positive once events were learned")
        self.gram_, self.cov_ = checked["gram_"], checked["cov_"]
        self.sum_rx_ = checked["sum_rx_"]
        self.lambda_, self.count_ = float(checked["lambda_"]), int(checked["count_"])
