"""Learning from logged plays, and learning that never leaves a non-finite state.

A learner that follows someone else's decisions (a challenger in the
trainer, a configuration trained on a decision log) first decides for the
logged contexts itself, so that its decision context holds the fields it
learns from (features, scores, ...), then learns with the *logged* play,
propensity and feedback in place of its own (:func:`with_logged_play`).

:func:`learn_finite` is ``learn_many`` with overflow warnings silenced and
the result checked: every float array of the state must be finite, so that
one event can never leave a model (or a challenger) unusable.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from app.learners.base import Batch, Learner

#: Fields of a logged decision that describe the play itself (the action taken and its
#: probability, or a continuous action and its density) rather than the deciding learner's
#: view of it.
PLAY_FIELDS = ("played", "prob", "log_prob", "action", "pdf")


def with_logged_play(own: Batch, logged: Mapping[str, np.ndarray]) -> Batch:
    """``own`` (a learner's decision contexts, stacked) with its play fields dropped and the
    ``logged`` play and feedback fields in their place."""
    return {**{k: v for k, v in own.items() if k not in PLAY_FIELDS}, **logged}


def learn_finite(learner: Learner, batch: Batch) -> None:
    """``learner.learn_many(batch)``; raises :class:`FloatingPointError` naming the array when
    the update left a non-finite value in the state (an overflow, a NaN-padded field).

    The learner is then in that state: a caller that must keep the old one learns on a copy.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        learner.learn_many(batch)
    for name, arr in learner.get_state().items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise FloatingPointError(f"the update would make {name} non-finite (overflow)")
