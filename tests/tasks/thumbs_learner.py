"""The learner of the test-only ``thumbs`` task (:mod:`tests.tasks.thumbs`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from app.learners.base import Decision, Event, Learner, ParamError, State, check_state
from tests.tasks.thumbs import NAME, THUMBS


class ThumbsGuess(Learner):
    """Guesses the more frequent thumb so far, exploring with probability ``epsilon``.

    The share of thumbs up is ``(ups + prior) / (seen + 2 prior)``; the greedy guess is
    "up" when it is at least 1/2.  Exploring, the guess is drawn from
    ``{greedy: 1 - epsilon / 2, other: epsilon / 2}`` (epsilon-greedy over two actions).

    Parameters
    ----------
    n_features : int
        Length of the inputs (read, not learned from).
    prior : float
        Pseudo-counts of a thumb up and of a thumb down before any feedback (> 0).
    epsilon : float
        Exploration rate, in ``[0, 1]``.
    seed : int or None
        Seed of the draws.
    """

    task: ClassVar[str] = NAME
    feedback_fields: ClassVar[tuple[str, ...]] = ("up",)
    logged_only: ClassVar[bool] = True
    paper: ClassVar[str] = "a test fixture"

    def __init__(self, n_features: int, prior: float = 1.0, epsilon: float = 0.5,
                 seed: int | None = None) -> None:
        if n_features < 1:
            raise ParamError("n_features", f"must be >= 1, got {n_features}")
        if not prior > 0:
            raise ParamError("prior", f"must be > 0, got {prior}")
        if not 0.0 <= epsilon <= 1.0:
            raise ParamError("epsilon", f"must be in [0, 1], got {epsilon}")
        self.n_features, self.prior, self.epsilon, self.seed = n_features, prior, epsilon, seed
        self.counts_ = np.zeros(2)  # thumbs up, thumbs seen
        self._rng = np.random.default_rng(seed)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``counts_``: 2 floats."""
        return 16

    def up_share(self) -> float:
        up, seen = self.counts_
        return float((up + self.prior) / (seen + 2 * self.prior))

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        greedy = int(self.up_share() >= 0.5)
        played, prob = greedy, 1.0
        if explore:
            played = greedy if self._rng.random() >= self.epsilon / 2 else 1 - greedy
            prob = 1.0 - self.epsilon / 2 if played == greedy else self.epsilon / 2
        return Decision({"thumb": THUMBS[played], "probability": prob},
                        {"x": np.array(x, dtype=np.float64), "played": np.array(played),
                         "prob": np.array(prob), "greedy": np.array(greedy)})

    def learn_one(self, event: Event) -> None:
        self.counts_ += (float(event["up"]), 1.0)

    def get_state(self) -> State:
        return {"counts_": self.counts_.copy()}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        self.counts_ = check_state(self.get_state(), state)["counts_"]
