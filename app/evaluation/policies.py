"""Target policies: each gives ``pi(a | x_i)`` for every logged event as an ``n x K`` matrix.

The logging policy is the exception: a log usually records only the
probability of the action it took, so :func:`logging_policy` gives its full
matrix when the log carries one and ``None`` otherwise, which the estimators
read as "the logging policy" (importance weight 1, see
:func:`app.evaluation.estimators.evaluate`).
"""

from __future__ import annotations

import numpy as np

from app.evaluation.estimators import LabelLog
from app.learners.base import Learner


def policy_kind(policy: object) -> str:
    """The kind of a queued evaluation's policy: ``configuration`` for an object,
    ``fixed:N`` for any fixed label, else its name.

    >>> [policy_kind(p) for p in ("uniform", "fixed:3", {"algorithm": "rcnbf"})]
    ['uniform', 'fixed:N', 'configuration']
    """
    if isinstance(policy, str):
        return "fixed:N" if policy.startswith("fixed:") else policy
    return "configuration"


def uniform_policy(log: LabelLog) -> np.ndarray:
    """Every action with probability ``1 / K``."""
    return np.full((log.n, log.n_actions), 1.0 / log.n_actions)


def fixed_policy(log: LabelLog, action: int) -> np.ndarray:
    """Always ``action`` (ValueError when it is not in ``0 .. K - 1``)."""
    if not 0 <= action < log.n_actions:
        raise ValueError(f"fixed action {action} not in 0..{log.n_actions - 1}")
    pi = np.zeros((log.n, log.n_actions))
    pi[:, action] = 1.0
    return pi


def logging_policy(log: LabelLog) -> np.ndarray | None:
    """The logging policy's ``n x K`` matrix when the log has it, else ``None`` (its
    probabilities of the actions not taken are unknown; the estimators then use weight 1)."""
    return log.logging


def position_frequencies(actions: np.ndarray, positions: np.ndarray, n_actions: int
                         ) -> np.ndarray:
    """``L x K`` share of each action at each position among the events of another log: a
    context-free policy's item-at-position probabilities estimated from its own log
    (ValueError when a position has no events)."""
    n_positions = int(positions.max()) + 1
    counts = np.zeros((n_positions, n_actions))
    np.add.at(counts, (positions, actions), 1.0)
    totals = counts.sum(axis=1, keepdims=True)
    if np.any(totals == 0):
        raise ValueError(f"positions {np.flatnonzero(totals[:, 0] == 0).tolist()} have no events")
    frequencies: np.ndarray = counts / totals
    return frequencies


def learner_policy(log: LabelLog, learner: Learner, greedy: bool = False) -> np.ndarray:
    """A label learner's ``n x K`` matrix on the log's contexts: as it explores, the
    distribution it draws its label from where it offers one (a ``probabilities(x)``
    method); its greedy label with probability 1 when ``greedy`` or it offers none."""
    probabilities = None if greedy else getattr(learner, "probabilities", None)
    if probabilities is not None:
        pi = np.array([probabilities(x) for x in log.X])
        if pi.shape != (log.n, log.n_actions):
            raise ValueError(f"the model has {pi.shape[1]} labels, the log {log.n_actions}")
        return pi
    labels = [int(d.output["label"]) for d in learner.decide_many(log.X, explore=False)]
    return np.eye(log.n_actions)[labels]
