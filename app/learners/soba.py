"""Second Order Banditron, SOBA (Beygelzimer, Orabona & Zhang, ICML 2017, Algorithm 1)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    Event,
    ParamError,
    State,
    check_positive,
    check_range,
)
from app.learners.linear import BanditronExploration, LinearLearner, check_click
from app.learners.proxy import check_noise_rates, unbiased_click

#: Largest ``K d`` for the full ``(Kd, Kd)`` inverse (200 MB of float64);
#: larger models must use ``diagonal=True``.
MAX_FULL_DIM = 5000


class SOBA(BanditronExploration, LinearLearner):
    """Second Order Banditron: an online-Newton step on importance-weighted hinge gradients.

    Plays like the Banditron (``p = (1 - gamma) e_yhat + gamma / K``).  State:
    ``A = a I`` (``Kd x Kd``; its inverse is kept and updated by
    Sherman-Morrison), ``theta = 0``, cumulative margin ``Mc = 0``, and
    ``W = reshape(A^-1 theta, (K, d))``.  On feedback for the played label
    ``yt`` with probability ``p = P(yt)`` (Beygelzimer et al. 2017, Algorithm 1):

    1. ``v`` = the click (or ``h(click)`` when ``noise_corrected``); if
       ``v = 0`` nothing happens.  Taking ``y = yt``, the hinge loss
       ``l = [1 - (Wx)_y + max_{r != y} (Wx)_r]_+``; if ``l = 0`` nothing
       happens, else ``ybar = argmax_{r != y} (Wx)_r``.
    2. ``g = (v / p) vec((e_ybar - e_y) x^T)``, ``z = sqrt(p) g``,
       ``m = (<W, z>^2 + 2 <W, g>) / (1 + z^T A^-1 z)``.
    3. If ``Mc + m >= 0``: ``Mc += m``, ``A += z z^T``, ``theta -= g``.

    With ``v = click`` this is SOBA as published (the click says ``yt = y``
    exactly when it is 1).  ``noise_corrected=True`` uses the unbiased proxy
    ``h(f) = (f - rho0)/(1 - rho0 - rho1)`` (P1 Lemma 1), whose expectation is
    the clean click, so ``g`` stays an unbiased gradient under click noise;
    it also updates (with a negative weight) on a 0 click when ``rho0 > 0``.
    State-dependent (SD): ``learn_many`` applies events one by one.

    ``W`` is updated incrementally: with ``u = A^-1 z`` (old ``A``),
    ``W_new = W - u / sqrt(p) - u (u^T theta_new) / (1 + z^T u)``.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``K``.
    seed:
        Seed of the exploration draws.
    gamma:
        Exploration rate in ``(0, 1/2]``.
    a:
        Regulariser ``a > 0`` (``A = a I`` initially).
    diagonal:
        Keep only the diagonal of ``A`` (the cheap variant); the
        full inverse needs ``(Kd)^2`` floats and is refused above
        :data:`MAX_FULL_DIM`.
    noise_corrected:
        Use ``h(click)`` in place of the click.
    rho0, rho1:
        Click-noise rates for ``noise_corrected`` (see
        :func:`app.learners.proxy.check_noise_rates`).

    Attributes
    ----------
    W_:
        ``(K, d)`` weights ``A^-1 theta``.
    Ainv_:
        ``(Kd, Kd)`` inverse of ``A`` (full variant) or ``(Kd,)`` diagonal of
        ``A`` (diagonal variant).
    theta_:
        ``(Kd,)``.
    margin_:
        ``(1,)`` cumulative margin ``Mc``.
    noise_rates_:
        ``[rho0, rho1]`` in use.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = SOBA(n_features=3, n_classes=3, seed=1, gamma=0.2)
    >>> for _ in range(500):
    ...     y = int(rng.integers(3)); x = np.eye(3)[y]
    ...     ctx = model.decide(x).context
    ...     model.learn_one({**ctx, "click": float(ctx["played"] == y)})
    >>> [model.decide(np.eye(3)[c], explore=False).output["label"] for c in range(3)]
    [0, 1, 2]
    """

    paper = (
        "Beygelzimer, Orabona & Zhang 2017, *Efficient Online Bandit Multiclass Learning "
        "with O(sqrt T) Regret*, Algorithm 1"
    )

    task = "label"
    feedback_fields = ("click",)
    uses_noise_rates = True
    one_right_label = True  # multi-class classification: one true label per input

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, gamma: float = 0.05, a: float = 1.0,
                 diagonal: bool = False, noise_corrected: bool = False,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed)
        self.gamma = check_range("gamma", gamma, 0.0, 0.5, low_open=True)
        self.a = check_positive("a", a)
        self.diagonal = bool(diagonal)
        self.noise_corrected = bool(noise_corrected)
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        dim = self.n_classes * self.n_features
        if not self.diagonal and dim > MAX_FULL_DIM:
            raise ParamError("diagonal", f"n_classes * n_features = {dim} > {MAX_FULL_DIM}: "
                                         "the full inverse is too large; use diagonal=True")
        self.noise_rates_ = np.array([self.rho0, self.rho1])
        self.Ainv_ = np.full(dim, self.a) if self.diagonal else np.eye(dim) / self.a
        self.theta_ = np.zeros(dim)
        self.margin_ = np.zeros(1)

    @classmethod
    def takes_noise_rates(cls, params: Mapping[str, Any]) -> bool:
        """Only the ``noise_corrected`` variant reads the rates."""
        return bool(params.get("noise_corrected"))

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``W_``, ``theta_``, ``A^-1`` (``K d`` floats diagonal, ``(K d)^2`` full), 3 scalars."""
        dim = (n_classes or 0) * n_features
        ainv = dim if params.get("diagonal") else dim * dim
        return ITEM_BYTES * (2 * dim + ainv + 3)

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Rates for ``h`` (used only when ``noise_corrected``), for later updates."""
        self.noise_rates_ = np.array(check_noise_rates(rho0, rho1))

    def learn_one(self, event: Event) -> None:
        click = float(check_click(event["click"]))
        v = (unbiased_click(click, float(self.noise_rates_[0]), float(self.noise_rates_[1]))
             if self.noise_corrected else click)
        if v == 0.0:
            return
        x = np.asarray(event["x"], dtype=np.float64)
        y, p = int(event["played"]), float(event["prob"])
        s = self.W_ @ x
        s_y = s[y]
        s[y] = -np.inf
        ybar = int(s.argmax())
        loss = 1.0 - s_y + s[ybar]
        if loss <= 0.0:
            return
        # g = (v/p) grad, z = sqrt(p) g = c grad with grad = +x at ybar, -x at y
        c = v / math.sqrt(p)
        K, d = self.n_classes, self.n_features
        by, bb = slice(y * d, (y + 1) * d), slice(ybar * d, (ybar + 1) * d)
        if self.diagonal:
            u = np.zeros(K * d)
            u[bb] = c * x / self.Ainv_[bb]
            u[by] = -c * x / self.Ainv_[by]
        else:
            u = c * (self.Ainv_[:, bb] @ x - self.Ainv_[:, by] @ x)
        z_u = c * (x @ u[bb] - x @ u[by])
        w_z = c * (s[ybar] - s_y)
        m = (w_z ** 2 + 2.0 * w_z / math.sqrt(p)) / (1.0 + z_u)
        if self.margin_[0] + m < 0.0:
            return
        self.margin_[0] += m
        g_scale = v / p
        self.theta_[bb] -= g_scale * x
        self.theta_[by] += g_scale * x
        if self.diagonal:
            self.Ainv_[bb] += (c * x) ** 2
            self.Ainv_[by] += (c * x) ** 2
            W = self.W_.reshape(-1)
            W[bb] = self.theta_[bb] / self.Ainv_[bb]
            W[by] = self.theta_[by] / self.Ainv_[by]
        else:
            den = 1.0 + z_u
            self.W_ -= ((1.0 / math.sqrt(p) + (u @ self.theta_) / den) * u).reshape(K, d)
            for r in range(K):  # rank-1 downdate of A^-1 by row blocks (bounded temporaries)
                rows = slice(r * d, (r + 1) * d)
                self.Ainv_[rows] -= np.outer(u[rows] / den, u)

    def _extra_state(self) -> State:
        return {"Ainv_": self.Ainv_.copy(), "theta_": self.theta_.copy(),
                "margin_": self.margin_.copy(), "noise_rates_": self.noise_rates_.copy()}

    def _load_extra_state(self, state: State) -> None:
        rates = state["noise_rates_"]
        self.noise_rates_ = np.array(check_noise_rates(float(rates[0]), float(rates[1])))
        self.Ainv_, self.theta_, self.margin_ = state["Ainv_"], state["theta_"], state["margin_"]
