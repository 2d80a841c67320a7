"""RCNBF and RCINE: Banditron with the unbiased proxy ``h`` of noisy clicks (P1 Algorithms 1-2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from app.learners.banditron import Banditron
from app.learners.base import ITEM_BYTES, State, check_int, check_range, size_param
from app.learners.proxy import BETA_FLOOR, check_noise_rates, unbiased_click


class RCNBF(Banditron):
    """Robust Classifier under Noisy Bandit Feedback (P1 Algorithm 1, eq. (5)).

    Plays like :class:`~app.learners.banditron.Banditron`; on a noisy click
    ``f`` it applies

        W <- W + x ((h(f) / P(ytilde)) e_ytilde - e_yhat),
        h(f) = (f - rho0) / (1 - rho0 - rho1)                (P1 Lemma 1)

    whose expectation over the draw and the noise is the Perceptron update
    ``x (e_y - e_yhat)`` (P1 Lemma 2).  With ``rho0 = rho1 = 0`` it is exactly
    the Banditron.  LO for fixed rates: a batch is one matrix product.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``K``.
    seed:
        Seed of the exploration draws.
    gamma:
        Exploration rate in ``(0, 1)``.
    rho0, rho1:
        Click-noise rates ``P(f=1 | correct=0)`` and ``P(f=0 | correct=1)``,
        each in ``[0, 1)``, with ``1 - rho0 - rho1 >= 0.01``.

    Attributes
    ----------
    W_:
        ``(K, d)`` weights.
    noise_rates_:
        ``[rho0, rho1]`` in use (changed by :meth:`set_noise_rates`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = RCNBF(n_features=3, n_classes=3, seed=1, gamma=0.2, rho0=0.2, rho1=0.3)
    >>> for _ in range(3000):
    ...     y = int(rng.integers(3)); x = np.eye(3)[y]
    ...     ctx = model.decide(x).context
    ...     f = float(ctx["played"] == y)
    ...     flip = rng.random() < (0.3 if f else 0.2)
    ...     model.learn_one({**ctx, "click": abs(f - flip)})
    >>> [model.decide(np.eye(3)[c], explore=False).output["label"] for c in range(3)]
    [0, 1, 2]
    """

    paper = (
        "Agarwal & Manwani, *Learning Multiclass Classifier Under Noisy Bandit Feedback*, "
        "Algorithm 1 (RCNBF)"
    )

    uses_noise_rates = True
    one_right_label = True  # P1 Section 3: one true label per input
    _beta_min: float = BETA_FLOOR

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, gamma: float = 0.05,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed, gamma=gamma)
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1, self._beta_min)
        self.noise_rates_ = np.array([self.rho0, self.rho1])

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``W_`` and the two noise rates."""
        return super().state_bytes(n_features, n_classes, params) + 2 * ITEM_BYTES

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Use new rates for updates processed from now on (past ones are kept)."""
        r0, r1 = check_noise_rates(rho0, rho1, self._beta_min)
        self.noise_rates_ = np.array([r0, r1])

    def click_value(self, click: Any) -> Any:
        """``h(f)``, the unbiased proxy of the clean click."""
        rho0, rho1 = self.noise_rates_.tolist()
        return unbiased_click(click, rho0, rho1)

    def _extra_state(self) -> State:
        return {"noise_rates_": self.noise_rates_.copy()}

    def _load_extra_state(self, state: State) -> None:
        rates = state["noise_rates_"]
        r0, r1 = check_noise_rates(float(rates[0]), float(rates[1]), self._beta_min)
        self.noise_rates_ = np.array([r0, r1])


class RCINE(RCNBF):
    """RCNBF with Iterative Noise-rate Estimation (P1 Algorithm 2).

    The learner is RCNBF whose rates start at the estimates ``rho0, rho1``
    (default 0, so it starts as the Banditron).  The driver (replay command
    or service worker) buffers the logged ``(x, played, click)`` of every
    ``n_s`` feedback events, runs NREst
    (:func:`app.learners.noise.estimate_noise_rates` with this learner's
    ``percentile`` and ``beta_min``) and calls :meth:`set_noise_rates`; the new
    rates apply to later updates only.  Batches must not span a refresh.

    Parameters
    ----------
    n_features, n_classes, seed:
        As :class:`RCNBF`.
    gamma:
        Exploration rate in ``(0, 1)``.
    rho0, rho1:
        Initial estimates of the click-noise rates (default 0), replaced by
        each NREst estimate.
    n_s:
        NREst period / buffer size in feedback events, ``>= 10 K`` (default
        5000; P1 does not report its value).
    beta_min:
        Floor on ``1 - rho0_hat - rho1_hat`` in ``(0, 1)`` (default 0.1);
        :meth:`set_noise_rates` refuses rates below it.
    percentile:
        NREst's perfect-example percentile in ``(0, 100]``; ``None`` means
        the K-dependent default ``100 (1 - 1/(2K))``.
    """

    paper = (
        "Agarwal & Manwani, *Learning Multiclass Classifier Under Noisy Bandit Feedback*, "
        "Algorithm 2 (RCINE) with Algorithm 3 (NREst)"
    )
    keeps_noise_samples = True
    owns_noise_estimate = True

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, gamma: float = 0.05,
                 rho0: float = 0.0, rho1: float = 0.0, n_s: int = 5000,
                 beta_min: float = 0.1, percentile: float | None = None) -> None:
        self._beta_min = check_range("beta_min", beta_min, 0.0, 1.0,
                                     low_open=True, high_open=True)
        self.beta_min = self._beta_min
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed, gamma=gamma,
                         rho0=rho0, rho1=rho1)
        self.n_s = check_int("n_s", n_s, 10 * self.n_classes)
        self.percentile = None if percentile is None else check_range(
            "percentile", percentile, 0.0, 100.0, low_open=True)

    @classmethod
    def noise_samples(cls, params: Mapping[str, Any]) -> int:
        """``n_s``: NREst refits on the last ``n_s`` samples."""
        return size_param(params, "n_s")

    @classmethod
    def buffer_bytes(cls, n_features: int, n_classes: int | None,
                     params: Mapping[str, Any]) -> int:
        """The ``n_s`` logged ``(x, played, click)`` samples NREst refits on."""
        return cls.noise_samples(params) * ITEM_BYTES * (n_features + 2)
