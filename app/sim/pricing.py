"""A pricing world for the ``continuous`` task: the best price depends on the customer.

A customer is ``x ~ U(-1, 1)^d``; their willingness to pay is
``v(x) = centre + spread * (u . x)`` with a fixed unit vector ``u`` (drawn from the
world's seed), and they buy at price ``p`` with probability

    P(buy | x, p) = 1 / (1 + exp((p - v(x)) / scale)).

The reward is the revenue ``p * buy``; the best price ``p*(x) = argmax_p p P(buy | x, p)``
moves with ``v(x)`` across the range.  Purchases are seen as clicks, each flipped with
``rho0`` (a purchase reported that did not happen) and ``rho1`` (one lost), as in
:func:`app.sim.feedback.noisy_clicks`; a learner is then sent ``click`` with
``click_value = p``.

:func:`app.sim.actions.play` runs a ``continuous`` learner through it (scores over a grid
of prices: :class:`app.sim.actions.ActionWorld`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sim.actions import SCORED, ActionWorld, Played, play
from app.sim.feedback import noisy_clicks

__all__ = ["SCORED", "Played", "PricingWorld", "play"]


@dataclass(frozen=True)
class PricingWorld(ActionWorld):
    """The world of the module docstring."""

    n_features: int = 3
    price_range: tuple[float, float] = (0.0, 10.0)
    centre: float = 2.0
    spread: float = 2.0
    scale: float = 1.0
    seed: int = 0
    direction: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        u = np.random.default_rng(self.seed).standard_normal(self.n_features)
        object.__setattr__(self, "direction", u / np.linalg.norm(u))

    @property
    def action_range(self) -> tuple[float, float]:
        return self.price_range

    def customers(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` customers' features, ``(n, d)``."""
        return rng.uniform(-1.0, 1.0, (n, self.n_features))

    def buy_probability(self, X: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """``P(buy | x, p)`` per row (``prices``: one per row, or a grid per row)."""
        value = self.centre + self.spread * (X @ self.direction)
        value = value.reshape(value.shape + (1,) * (np.ndim(prices) - 1))
        out: np.ndarray = 1.0 / (1.0 + np.exp((prices - value) / self.scale))
        return out

    def revenue(self, X: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """Expected revenue ``p P(buy | x, p)`` per row."""
        out: np.ndarray = prices * self.buy_probability(X, prices)
        return out

    def reward(self, X: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The expected reward: the revenue."""
        return self.revenue(X, actions)

    def best_prices(self, X: np.ndarray) -> np.ndarray:
        """``p*(x)`` per row (on the grid: :meth:`~app.sim.actions.ActionWorld.best_actions`)."""
        return self.best_actions(X)

    def purchases(self, X: np.ndarray, prices: np.ndarray, rng: np.random.Generator,
                  rho0: float = 0.0, rho1: float = 0.0) -> np.ndarray:
        """Observed purchases (0/1) at ``prices``, flipped with ``rho0``/``rho1``."""
        bought = (rng.random(len(X)) < self.buy_probability(X, prices)).astype(np.float64)
        return noisy_clicks(bought, rho0, rho1, rng)

    def observe(self, X: np.ndarray, actions: np.ndarray, rng: np.random.Generator,
                rho0: float = 0.0, rho1: float = 0.0) -> dict[str, np.ndarray]:
        """Noisy purchases as clicks worth the price: ``reward`` the observed revenue."""
        clicks = self.purchases(X, actions, rng, rho0, rho1)
        return {"reward": actions * clicks, "click_value": actions}
