"""Ridge regression on context-action features, optimistic over a grid, smoothed
(``ridge_ucb``).

The reward is modelled as linear in the features of a context and an action,

    r(x, a) ~ theta . phi(x, a),    phi(x, a) = z (x) P(t),

with ``z = [1, x]``, ``t = 2 (a - lo) / (hi - lo) - 1`` and ``P(t)`` the Legendre
polynomials ``P_0 .. P_p`` of degree ``p`` (``(x)``: the Kronecker product): a smooth
reward curve over the range whose shape depends on the context.  Ridge regression gives
``theta = V^-1 b`` with ``V = lambda I + sum phi phi^T``, ``b = sum r phi``, and its
width ``w(x, a) = sqrt(phi^T V^-1 phi)``; the decision takes LinUCB's optimistic action
(Li, Chu, Langford & Schapire 2010, Algorithm 1, over the actions of a grid,
``argmax_g theta . phi(x, a_g) + alpha w(x, a_g)``) and plays the smoothed policy around it
(Majzoubi et al. 2020, Section 2; :mod:`app.learners.smoothing`).  Learning is direct: the
regression fits the reward of the action played, so no importance weight enters it.

Forgetting (``half_life``, :mod:`app.learners.forgetting`): the sums weigh an event learned
``s`` events ago by ``gamma^s`` and the width is D-LinUCB's ``sqrt(phi^T V^-1 V~ V^-1 phi)``
with ``V~ = lambda I + sum gamma^(2s) phi phi^T`` (Russac, Vernade & Cappe 2019,
Algorithm 1), so that the regression follows a world whose reward curve moves.

With numba (:mod:`app.learners.jit`) decisions and updates run in compiled passes
(:mod:`app.learners.ridge_actions_kernel`), the numpy methods here being their reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.polynomial import legendre

from app.learners import jit
from app.learners.base import (
    ITEM_BYTES,
    Batch,
    Event,
    ParamError,
    State,
    check_int,
    check_non_negative,
    check_positive,
    check_state,
    size_param,
)
from app.learners.forgetting import check_half_life, decay, discount
from app.learners.ridge_actions_kernel import BAD_COLUMNS, ucb_decide, ucb_learn, ucb_solve
from app.learners.smoothing import DEFAULT_RANGE, ContinuousBandit

#: Largest feature count ``(d + 1)(p + 1)`` of the regression (its ``V`` is kept whole).
MAX_DIM = 512


def action_basis(action: np.ndarray, action_range: tuple[float, float],
                 degree: int) -> np.ndarray:
    """``P_0(t) .. P_p(t)`` of each action, ``t = 2 (a - lo) / (hi - lo) - 1`` clipped to
    ``[-1, 1]``, shape ``(n, p + 1)``.

    >>> action_basis(np.array([0.0, 5.0, 10.0]), (0.0, 10.0), 2)
    array([[ 1. , -1. ,  1. ],
           [ 1. ,  0. , -0.5],
           [ 1. ,  1. ,  1. ]])
    """
    lo, hi = action_range
    t = np.clip(2.0 * (np.asarray(action, dtype=np.float64) - lo) / (hi - lo) - 1.0, -1.0,
                1.0)
    out: np.ndarray = legendre.legvander(t, degree)
    return out


def context_action_features(Z: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``phi = z (x) P`` per row (module docstring): ``phi[i (p + 1) + j] = z_i P_j``, from
    the inputs with their intercept ``Z`` and the actions' :func:`action_basis`."""
    out: np.ndarray = (basis[:, None, :] * Z[:, :, None]).reshape(Z.shape[0], -1)
    return out


class RidgeUCB(ContinuousBandit):
    """Ridge regression on ``z (x) P(t)``, optimistic over ``grid`` actions, smoothed.

    Parameters
    ----------
    n_features:
        Input dimension ``d``.
    seed:
        Seed of the draws.
    action_range:
        ``[lo, hi]``, the actions.
    degree:
        ``p``, the Legendre degree of the reward curve.
    grid:
        Actions the optimistic argmax looks at, evenly spaced over the range, ends included.
    alpha:
        Width of the optimism bonus, on the scale of the rewards (0: greedy).
    bandwidth:
        Smoothing half-width ``h`` in action units; None: ``(hi - lo) / 32``.
    epsilon:
        Share of actions drawn uniformly over the range.
    ridge:
        ``lambda`` of the regression.
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more events
        (module docstring); null never forgets.
    rho0, rho1:
        Click-noise rates (a click's reward is corrected with them).

    Attributes
    ----------
    gram_ : ndarray of shape (D, D)
        ``sum phi phi^T``, ``D = (d + 1)(p + 1)``.
    sum_rphi_ : ndarray of shape (D,)
        ``sum r phi``.
    gram_sq_ : ndarray of shape (D, D), or (0, 0) without forgetting
        ``sum gamma^(2s) phi phi^T``.

    Examples
    --------
    The best action is ``0.2 + 0.6 x``:

    >>> rng = np.random.default_rng(0)
    >>> learner = RidgeUCB(n_features=1, seed=0)
    >>> for _ in range(1000):
    ...     x = rng.random(1)
    ...     d = learner.decide(x)
    ...     a = d.output["action"]
    ...     r = a * (0.4 + 1.2 * x[0]) - a * a + 0.1 * rng.standard_normal()
    ...     learner.learn_one({**d.context, "reward": r, "click_value": np.nan})
    >>> [round(learner.decide(np.array([x]), explore=False).output["action"], 2)
    ...  for x in (0.0, 1.0)]
    [0.19, 0.79]
    """

    paper: ClassVar[str] = ("Li, Chu, Langford & Schapire 2010, Algorithm 1 (LinUCB) over a "
                            "grid of actions on context-action features, smoothed as in "
                            "Majzoubi et al. 2020, Section 2")

    def __init__(self, n_features: int, seed: int | None = None,
                 action_range: Sequence[float] = DEFAULT_RANGE, degree: int = 3,
                 grid: int = 64, alpha: float = 1.0, bandwidth: float | None = None,
                 epsilon: float = 0.02, ridge: float = 1.0, half_life: float | None = None,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, seed=seed, action_range=action_range,
                         bandwidth=bandwidth, epsilon=epsilon, rho0=rho0, rho1=rho1)
        self.degree = check_int("degree", degree, 1, 12)
        self.grid = check_int("grid", grid, 2, 4096)
        self.alpha = check_non_negative("alpha", alpha)
        self.ridge = check_positive("ridge", ridge)
        self.half_life = check_half_life(half_life)
        self._gamma = discount(self.half_life)
        dim = (self.n_features + 1) * (self.degree + 1)
        if dim > MAX_DIM:
            raise ParamError("n_features", f"(n_features + 1)(degree + 1) must be at most "
                                           f"{MAX_DIM}, got {dim}")
        lo, hi = self.action_range
        self.actions = np.linspace(lo, hi, self.grid)
        self._basis = np.ascontiguousarray(self.basis(self.actions))  # the kernel's layout
        self.gram_ = np.zeros((dim, dim))
        self.sum_rphi_ = np.zeros(dim)
        self.gram_sq_ = np.zeros((dim, dim) if self.half_life is not None else (0, 0))
        self._solved: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``gram_`` and ``sum_rphi_``: ``D (D + 1)`` floats; with a ``half_life``
        ``gram_sq_`` too (``D^2``)."""
        dim = (n_features + 1) * (size_param(params, "degree") + 1)
        forgets = params.get("half_life") is not None
        return ITEM_BYTES * dim * (dim + 1 + (dim if forgets else 0))

    @property
    def half_width(self) -> float:
        lo, hi = self.action_range
        return self.bandwidth if self.bandwidth is not None else (hi - lo) / 32

    def basis(self, action: np.ndarray) -> np.ndarray:
        """``P(t)`` of each action, shape ``(n, p + 1)`` (:func:`action_basis`)."""
        return action_basis(action, self.action_range, self.degree)

    def solved(self) -> tuple[np.ndarray, np.ndarray]:
        """``(theta, W)``: ``theta = V^-1 b`` and the width's matrix ``W = V^-1`` (with
        forgetting ``V^-1 V~ V^-1``; module docstring), kept until the next update."""
        if self._solved is None:
            forgets = self.half_life is not None
            if jit.enabled():
                self._solved = ucb_solve(self.gram_, self.gram_sq_, self.sum_rphi_,
                                         self.ridge, forgets)
            else:
                eye = self.ridge * np.eye(self.gram_.shape[0])
                cov = np.linalg.inv(self.gram_ + eye)
                width = cov @ (self.gram_sq_ + eye) @ cov if forgets else cov
                self._solved = (cov @ self.sum_rphi_, width)
        return self._solved

    def centres(self, Z: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """The greedy grid action per row and, exploring, the optimistic one.

        With ``theta`` as a ``(d + 1) x (p + 1)`` matrix ``T``, the means over the grid are
        ``(Z T) B^T`` (``B``: the grid's basis); with ``V^-1`` as ``C[i, j, k, l]``, the
        squared widths are ``sum_jl B_gj B_gl sum_ik z_i z_k C[i, j, k, l]``.
        """
        theta, width_matrix = self.solved()
        dz, db = Z.shape[1], self.degree + 1
        mean = (Z @ theta.reshape(dz, db)) @ self._basis.T
        greedy: np.ndarray = self.actions[np.argmax(mean, axis=1)]
        if not explore or self.alpha == 0.0:
            return greedy, greedy
        inner = np.einsum("ni,ijkl,nk->njl", Z, width_matrix.reshape(dz, db, dz, db), Z)
        width = np.sqrt(np.maximum(np.einsum("njl,gj,gl->ng", inner, self._basis,
                                             self._basis), 0.0))
        centre: np.ndarray = self.actions[np.argmax(mean + self.alpha * width, axis=1)]
        return greedy, centre

    def decide_contexts(self, X: np.ndarray, explore: bool = True) -> Batch:
        """:meth:`ContinuousBandit.decide_contexts` (the reference), in one compiled pass
        with numba (:func:`~app.learners.ridge_actions_kernel.ucb_decide`)."""
        if not jit.enabled():
            return super().decide_contexts(X, explore)
        X = np.array(X, dtype=np.float64, order="C")  # a copy: the decision keeps its own
        if X.ndim != 2 or X.shape[1] != self.n_features or not np.isfinite(X).all():
            return super().decide_contexts(X, explore)  # refuses them, naming the field
        theta, width = self.solved()
        lo, hi = self.action_range
        u = self._rng.random((X.shape[0], 2)) if explore else np.empty((0, 2))
        greedy, action, pdf = ucb_decide(X, theta, width, self._basis, self.actions,
                                         self.alpha, explore, u, lo, hi, self.half_width,
                                         self.epsilon)
        return {"x": X, "action": action, "pdf": pdf, "greedy": greedy}

    def learn_one(self, event: Event) -> None:
        self.learn_many(event)

    def learn_many(self, batch: Batch) -> None:
        """:meth:`ContinuousBandit.learn_many` (the reference), in one compiled pass with
        numba (:func:`~app.learners.ridge_actions_kernel.ucb_learn`)."""
        if not batch:
            return
        if not jit.enabled():
            super().learn_many(batch)
            return
        X = np.ascontiguousarray(batch["x"], dtype=np.float64)
        X = X[None, :] if X.ndim == 1 else X
        action, pdf, reward, value = (
            np.ascontiguousarray(batch[name], dtype=np.float64).reshape(-1)
            for name in ("action", "pdf", "reward", "click_value"))
        lo, hi = self.action_range
        if (X.ndim != 2 or X.shape[1] != self.n_features
                or not len(X) == len(action) == len(pdf) == len(reward) == len(value)
                or BAD_COLUMNS[ucb_learn(X, action, pdf, reward, value, lo, hi, self.degree,
                                         self.rho0, self.rho1, self._gamma,
                                         self.half_life is not None, self.gram_,
                                         self.gram_sq_, self.sum_rphi_)]):
            super().learn_many(batch)  # refuses it, naming the column
        self._solved = None

    def _learn(self, Z: np.ndarray, action: np.ndarray, pdf: np.ndarray,
               r: np.ndarray) -> None:
        phi = context_action_features(Z, self.basis(action))
        if self.half_life is None:
            self.gram_ += phi.T @ phi
            self.sum_rphi_ += phi.T @ r
        else:
            n = len(r)
            age = decay(self._gamma, np.arange(n - 1, -1, -1))  # gamma^(events after it)
            whole = float(decay(self._gamma, np.array(n)))
            self.gram_ *= whole
            self.gram_ += (phi * age[:, None]).T @ phi
            self.gram_sq_ *= whole * whole
            self.gram_sq_ += (phi * (age * age)[:, None]).T @ phi
            self.sum_rphi_ *= whole
            self.sum_rphi_ += phi.T @ (age * r)
        self._solved = None

    def get_state(self) -> State:
        """``gram_`` and ``sum_rphi_``, and ``gram_sq_`` with forgetting (so that a state
        saved without forgetting loads as it was)."""
        state = {"gram_": self.gram_.copy(), "sum_rphi_": self.sum_rphi_.copy()}
        if self.half_life is not None:
            state["gram_sq_"] = self.gram_sq_.copy()
        return state

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        self.gram_, self.sum_rphi_ = checked["gram_"], checked["sum_rphi_"]
        self.gram_sq_ = checked.get("gram_sq_", self.gram_sq_)
        self._solved = None
