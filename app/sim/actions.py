"""What the simulated worlds of the ``continuous`` task share: scoring over a grid of
actions, and playing a learner through a world.

A world (:class:`ActionWorld`) draws contexts, knows each context's expected reward at
any action in its ``action_range`` and draws the feedback a learner is sent.  The best
action and a uniform action's expected reward per context are computed on a grid of
:data:`GRID` actions; "gap closed" is ``(reward - uniform) / (best - uniform)`` summed
over the contexts: 1 is every context's best action, 0 an action drawn uniformly.

:func:`play` runs a ``continuous`` learner through a world in process (decide, then learn
each batch of ``batch`` decisions, as a service's trainer does) and reports the share of
the gap it closes (:class:`Played`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.learners.base import Learner

#: Actions the best action and the uniform action's reward are computed on (per context).
GRID = 2001
#: Contexts scored on the grid at once.
CHUNK = 1024
#: Fresh contexts the final policy is scored on.
SCORED = 4000
#: Points of :attr:`Played.curve`.
CURVE_POINTS = 200


class ActionWorld(ABC):
    """A world of the ``continuous`` task (module docstring)."""

    n_features: int
    """Features of a context."""

    @property
    @abstractmethod
    def action_range(self) -> tuple[float, float]:
        """The actions ``[lo, hi]``."""

    @abstractmethod
    def customers(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` contexts, ``(n, d)``."""

    @abstractmethod
    def reward(self, X: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The expected reward per row (``actions``: one per row, or a grid per row)."""

    @abstractmethod
    def observe(self, X: np.ndarray, actions: np.ndarray, rng: np.random.Generator,
                rho0: float = 0.0, rho1: float = 0.0) -> dict[str, np.ndarray]:
        """The feedback of one action per row as a learner reads it: ``reward`` and
        ``click_value`` (NaN for a plain reward; clicks flipped with ``rho0``/``rho1``)."""

    def _over_grid(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the best grid action and the mean reward over the grid (in chunks of
        :data:`CHUNK` rows, so that memory stays bounded)."""
        grid = np.linspace(*self.action_range, GRID)
        best, mean = np.empty(len(X)), np.empty(len(X))
        for start in range(0, len(X), CHUNK):
            rows = slice(start, start + CHUNK)
            reward = self.reward(X[rows], np.tile(grid, (len(X[rows]), 1)))
            best[rows], mean[rows] = grid[np.argmax(reward, axis=1)], reward.mean(axis=1)
        return best, mean

    def best_actions(self, X: np.ndarray) -> np.ndarray:
        """The best action per row (on a grid of :data:`GRID` actions)."""
        return self._over_grid(X)[0]

    def best_reward(self, X: np.ndarray) -> np.ndarray:
        """The best action's expected reward per row."""
        return self.reward(X, self.best_actions(X))

    def uniform_reward(self, X: np.ndarray) -> np.ndarray:
        """A uniform action's expected reward per row (the mean over the grid)."""
        return self._over_grid(X)[1]

    def gap_closed(self, X: np.ndarray, reward: np.ndarray) -> float:
        """``(mean reward - uniform) / (best - uniform)`` over contexts ``X``."""
        uniform = float(self.uniform_reward(X).mean())
        return (float(np.mean(reward)) - uniform) / (float(self.best_reward(X).mean())
                                                     - uniform)


@dataclass(frozen=True)
class Played:
    """What :func:`play` measured (gap shares: :meth:`ActionWorld.gap_closed`)."""

    rounds: int
    online: float
    """Gap closed by the actions played over the rounds (exploration included)."""
    greedy: float
    """Gap closed by the final greedy actions, on fresh contexts."""
    smoothed: float
    """Gap closed by the final smoothed (exploring) policy, on fresh contexts."""
    cpu_seconds: float
    """CPU time of the rounds (decisions, the world's draws, learning; not the scoring)."""
    curve: list[tuple[int, float]]
    """Gap closed by the actions played in the first ``t`` rounds, at up to
    :data:`CURVE_POINTS` values of ``t``."""
    actions: tuple[np.ndarray, np.ndarray]
    """The fresh contexts' best actions and the final greedy ones (the learned action
    against the best, per context)."""


def play(learner: Learner, world: ActionWorld, rounds: int, seed: int, *, batch: int = 1,
         rho0: float = 0.0, rho1: float = 0.0,
         progress: Callable[[int], None] | None = None) -> Played:
    """Run ``learner`` (a ``continuous`` learner over the world's action range) for
    ``rounds`` contexts: each batch of ``batch`` decisions is made on one state, then its
    feedback (:meth:`ActionWorld.observe`) is learned in one ``learn_many`` (``progress``
    is told the rounds of each batch)."""
    rng = np.random.default_rng(seed)
    X = world.customers(rounds, rng)
    earned = np.empty(rounds)
    cpu = time.process_time()
    for start in range(0, rounds, batch):
        rows = slice(start, min(start + batch, rounds))
        contexts = learner.decide_contexts(X[rows])
        actions = np.asarray(contexts["action"], dtype=np.float64)
        earned[rows] = world.reward(X[rows], actions)
        learner.learn_many({**contexts, **world.observe(X[rows], actions, rng, rho0, rho1)})
        if progress is not None:
            progress(rows.stop - rows.start)
    cpu = time.process_time() - cpu
    uniform = np.cumsum(world.uniform_reward(X))
    gained, possible = np.cumsum(earned) - uniform, np.cumsum(world.best_reward(X)) - uniform
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    fresh = world.customers(SCORED, rng)
    greedy = np.asarray(learner.decide_contexts(fresh, explore=False)["greedy"])
    smoothed = np.asarray(learner.decide_contexts(fresh)["action"])
    return Played(rounds, float(gained[-1] / possible[-1]),
                  world.gap_closed(fresh, world.reward(fresh, greedy)),
                  world.gap_closed(fresh, world.reward(fresh, smoothed)), cpu,
                  [(int(t), float(gained[t - 1] / possible[t - 1])) for t in points],
                  (world.best_actions(fresh), greedy))
