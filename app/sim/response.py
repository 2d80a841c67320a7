"""A regression-style world for the ``continuous`` task: a dose-response curve whose best
dose depends on the context, rewards measured with Gaussian noise.

A context is ``x ~ U(-1, 1)^d``; the expected reward of action ``a`` in ``[0, 1]`` is

    f(x, a) = level * (v . x) + exp(-(a - m(x))^2 / (2 width^2)),
    m(x) = centre + spread * tanh(u . x),

with fixed unit vectors ``u`` and ``v`` drawn from the world's seed: a bump of height 1
around the best action ``m(x)`` (from 0.2 to 0.8 at the defaults), on a level that moves
with the context but not with the action.  A learner is sent ``reward = f(x, a) + e`` with
``e ~ N(0, noise^2)`` (a plain reward: no clicks, no click noise).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sim.actions import ActionWorld


@dataclass(frozen=True)
class ResponseWorld(ActionWorld):
    """The world of the module docstring."""

    n_features: int = 3
    centre: float = 0.5
    spread: float = 0.3
    width: float = 0.15
    level: float = 0.5
    noise: float = 0.5
    seed: int = 0
    directions: np.ndarray = field(init=False, repr=False, compare=False)
    """``u`` and ``v`` as rows."""

    def __post_init__(self) -> None:
        uv = np.random.default_rng(self.seed).standard_normal((2, self.n_features))
        object.__setattr__(self, "directions", uv / np.linalg.norm(uv, axis=1, keepdims=True))

    @property
    def action_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def customers(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` contexts, ``(n, d)``."""
        return rng.uniform(-1.0, 1.0, (n, self.n_features))

    def best_dose(self, X: np.ndarray) -> np.ndarray:
        """``m(x)`` per row (exact, not on a grid).

        >>> world = ResponseWorld()
        >>> X = world.customers(2000, np.random.default_rng(0))
        >>> bool(np.abs(world.best_actions(X) - world.best_dose(X)).max() <= 0.5 / 2000)
        True
        """
        out: np.ndarray = self.centre + self.spread * np.tanh(X @ self.directions[0])
        return out

    def reward(self, X: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``f(x, a)`` per row (``actions``: one per row, or a grid per row)."""
        shape = (len(X),) + (1,) * (np.ndim(actions) - 1)
        best = self.best_dose(X).reshape(shape)
        level = (self.level * (X @ self.directions[1])).reshape(shape)
        out: np.ndarray = level + np.exp(-((actions - best) ** 2) / (2 * self.width ** 2))
        return out

    def observe(self, X: np.ndarray, actions: np.ndarray, rng: np.random.Generator,
                rho0: float = 0.0, rho1: float = 0.0) -> dict[str, np.ndarray]:
        """Rewards measured with Gaussian noise (``click_value`` NaN: plain rewards); click
        noise does not apply (ValueError for rates other than 0)."""
        if rho0 or rho1:
            raise ValueError("the response world's rewards are measurements, not clicks: "
                             "click-noise rates do not apply")
        measured = self.reward(X, actions) + rng.normal(0.0, self.noise, len(X))
        return {"reward": measured, "click_value": np.full(len(X), np.nan)}
