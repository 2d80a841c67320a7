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

:func:`play` runs a ``continuous`` learner through the world in process (decide, then
learn each batch of ``batch`` decisions, as a service's trainer does) and reports the share
of the gap between the uniform price and the best price it closes (:class:`Played`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.learners.base import Learner
from app.sim.feedback import noisy_clicks

#: Prices the best price and the uniform price's revenue are computed on (per customer).
GRID = 2001
#: Customers scored on the grid at once.
CHUNK = 1024


@dataclass(frozen=True)
class PricingWorld:
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

    def _over_grid(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the best grid price and the mean revenue over the grid (in chunks of
        :data:`CHUNK` rows, so that memory stays bounded)."""
        grid = np.linspace(*self.price_range, GRID)
        best, mean = np.empty(len(X)), np.empty(len(X))
        for start in range(0, len(X), CHUNK):
            rows = slice(start, start + CHUNK)
            revenue = self.revenue(X[rows], np.tile(grid, (len(X[rows]), 1)))
            best[rows], mean[rows] = grid[np.argmax(revenue, axis=1)], revenue.mean(axis=1)
        return best, mean

    def best_prices(self, X: np.ndarray) -> np.ndarray:
        """``p*(x)`` per row (on a grid of :data:`GRID` prices)."""
        return self._over_grid(X)[0]

    def best_revenue(self, X: np.ndarray) -> np.ndarray:
        """The best price's expected revenue per row."""
        return self.revenue(X, self.best_prices(X))

    def uniform_revenue(self, X: np.ndarray) -> np.ndarray:
        """A uniform price's expected revenue per row (the mean over the grid)."""
        return self._over_grid(X)[1]

    def purchases(self, X: np.ndarray, prices: np.ndarray, rng: np.random.Generator,
                  rho0: float = 0.0, rho1: float = 0.0) -> np.ndarray:
        """Observed purchases (0/1) at ``prices``, flipped with ``rho0``/``rho1``."""
        bought = (rng.random(len(X)) < self.buy_probability(X, prices)).astype(np.float64)
        return noisy_clicks(bought, rho0, rho1, rng)

    def gap_closed(self, X: np.ndarray, revenue: np.ndarray) -> float:
        """``(mean revenue - uniform) / (best - uniform)`` over customers ``X``."""
        uniform = float(self.uniform_revenue(X).mean())
        return (float(np.mean(revenue)) - uniform) / (float(self.best_revenue(X).mean())
                                                      - uniform)


@dataclass(frozen=True)
class Played:
    """What :func:`play` measured (gap shares: :meth:`PricingWorld.gap_closed`)."""

    rounds: int
    online: float
    """Gap closed by the actions played over the rounds (exploration included)."""
    greedy: float
    """Gap closed by the final greedy prices, on fresh customers."""
    smoothed: float
    """Gap closed by the final smoothed (exploring) policy, on fresh customers."""
    cpu_seconds: float
    """CPU time of the rounds (decisions, the world's draws, learning; not the scoring)."""
    curve: list[tuple[int, float]]
    """Gap closed by the prices played in the first ``t`` rounds, at up to
    :data:`CURVE_POINTS` values of ``t``."""


#: Fresh customers the final policy is scored on.
SCORED = 4000
#: Points of :attr:`Played.curve`.
CURVE_POINTS = 200


def play(learner: Learner, world: PricingWorld, rounds: int, seed: int, *, batch: int = 1,
         rho0: float = 0.0, rho1: float = 0.0,
         progress: Callable[[int], None] | None = None) -> Played:
    """Run ``learner`` (a ``continuous`` learner over the world's price range) for
    ``rounds`` customers: each batch of ``batch`` decisions is made on one state, then its
    noisy purchases (``click_value``: the price) are learned in one ``learn_many``
    (``progress`` is told the rounds of each batch)."""
    rng = np.random.default_rng(seed)
    X = world.customers(rounds, rng)
    earned = np.empty(rounds)
    cpu = time.process_time()
    for start in range(0, rounds, batch):
        rows = slice(start, min(start + batch, rounds))
        contexts = learner.decide_contexts(X[rows])
        prices = np.asarray(contexts["action"], dtype=np.float64)
        earned[rows] = world.revenue(X[rows], prices)
        clicks = world.purchases(X[rows], prices, rng, rho0, rho1)
        learner.learn_many({**contexts, "reward": prices * clicks, "click_value": prices})
        if progress is not None:
            progress(rows.stop - rows.start)
    cpu = time.process_time() - cpu
    uniform = np.cumsum(world.uniform_revenue(X))
    gained, possible = np.cumsum(earned) - uniform, np.cumsum(world.best_revenue(X)) - uniform
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    fresh = world.customers(SCORED, rng)
    greedy = learner.decide_contexts(fresh, explore=False)["greedy"]
    smoothed = learner.decide_contexts(fresh)["action"]
    return Played(rounds, float(gained[-1] / possible[-1]),
                  world.gap_closed(fresh, world.revenue(fresh, np.asarray(greedy))),
                  world.gap_closed(fresh, world.revenue(fresh, np.asarray(smoothed))), cpu,
                  [(int(t), float(gained[t - 1] / possible[t - 1])) for t in points])
