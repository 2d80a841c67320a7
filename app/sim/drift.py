"""Worlds that change: drift schedules for the replays of the ``label`` and ``rank`` tasks.

A :class:`Drift` says when and how a stream's truth moves away from the
world it starts in to a second world, as a *share of the new world* per
round (:meth:`Drift.share`):

* ``abrupt``: the new world from round ``change_at`` on (share 0, then 1);
* ``gradual``: a linear ramp from ``change_at`` over ``span`` rounds;
* ``churn``: from ``change_at``, every ``span`` rounds one more part of the
  world is replaced (a label pair of the ``label`` task, a context feature's
  row of the relevance matrix of the ``rank`` task);
* ``none``: a stationary stream (the control).

The ``label`` task's worlds are label maps (:func:`drifted_labels`): the
second world answers a class ``y`` with the label ``pi(y)`` of a random
derangement ``pi``, so every learned label-to-click relation becomes wrong
at once; under ``gradual`` a round uses ``pi`` with the ramp's probability
(a mixture of the two concepts, the "gradual drift" of Gama et al. 2014,
*A Survey on Concept Drift Adaptation*, section 2.3); under ``churn`` the
map is the composition of one more transposition per period.  The ``rank``
task's relevance matrix rotates (:func:`rotated`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Drift kinds, ``none`` first (the stationary control).
DRIFTS = ("none", "abrupt", "gradual", "churn")
#: Round of the change, as in the acceptance scenario: 20,000 events of one world first.
DEFAULT_CHANGE_AT = 20_000
#: Rounds of a gradual ramp, and between two replacements under churn.
DEFAULT_SPAN = 10_000


@dataclass(frozen=True)
class Drift:
    """When a stream moves to its second world (module docstring)."""

    kind: str = "none"
    change_at: int = DEFAULT_CHANGE_AT
    span: int = DEFAULT_SPAN

    def __post_init__(self) -> None:
        if self.kind not in DRIFTS:
            raise ValueError(f"drift must be one of {DRIFTS}, got {self.kind!r}")
        if self.change_at < 0:
            raise ValueError(f"change_at must be >= 0, got {self.change_at}")
        if self.span < 1:
            raise ValueError(f"span must be >= 1, got {self.span}")

    def share(self, t: np.ndarray) -> np.ndarray:
        """Share of the new world at rounds ``t`` (0 before ``change_at``; ``churn``: the
        number of parts replaced, 1 at ``change_at``, one more every ``span`` rounds).

        >>> Drift("gradual", change_at=10, span=4).share(np.array([9, 10, 12, 20]))
        array([0. , 0. , 0.5, 1. ])
        >>> Drift("churn", change_at=10, span=4).share(np.array([9, 10, 14]))
        array([0., 1., 2.])
        """
        t = np.asarray(t, dtype=np.float64)
        after = t >= self.change_at
        if self.kind == "none":
            return np.zeros_like(t)
        if self.kind == "abrupt":
            return after.astype(np.float64)
        if self.kind == "gradual":
            out: np.ndarray = np.clip((t - self.change_at) / self.span, 0.0, 1.0)
            return out
        steps: np.ndarray = np.where(after, 1.0 + np.floor((t - self.change_at) / self.span), 0.0)
        return steps


def derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random permutation of ``range(n)`` without a fixed point (``n >= 2``): a random
    order shifted by one place.

    >>> p = derangement(5, np.random.default_rng(0))
    >>> sorted(p.tolist()), bool((p != np.arange(5)).all())
    ([0, 1, 2, 3, 4], True)
    """
    order = rng.permutation(n)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.roll(order, -1)
    return out


def drifted_labels(y: np.ndarray, drift: Drift, n_classes: int,
                   rng: np.random.Generator) -> np.ndarray:
    """The true label of each round ``t`` (``y[t]`` in the first world) under ``drift``.

    >>> y = np.zeros(6, dtype=np.int64)
    >>> drifted_labels(y, Drift("abrupt", change_at=3), 2, np.random.default_rng(0)).tolist()
    [0, 0, 0, 1, 1, 1]
    """
    t = np.arange(y.shape[0])
    share = drift.share(t)
    if drift.kind == "churn":
        swaps = [rng.choice(n_classes, size=2, replace=False) for _ in range(int(share.max()))]
        maps = np.tile(np.arange(n_classes), (len(swaps) + 1, 1))
        for j, (a, b) in enumerate(swaps, start=1):
            maps[j] = maps[j - 1]
            maps[j, [a, b]] = maps[j - 1, [b, a]]
        churned: np.ndarray = maps[share.astype(np.intp), y]
        return churned
    pi = derangement(n_classes, rng)
    new = rng.random(y.shape[0]) < share
    drifted: np.ndarray = np.where(new, pi[y], y)
    return drifted


def rotated(first: np.ndarray, second: np.ndarray, share: float | np.ndarray) -> np.ndarray:
    """``cos(pi s / 2) first + sin(pi s / 2) second``: the rotation from one relevance matrix
    to another of the same scale (independent Gaussian matrices are near orthogonal, so the
    norm stays); ``share`` is one number, or one per row (churn: rows switch one by one).

    >>> rotated(np.ones((1, 2)), np.zeros((1, 2)), 1.0).round(12).tolist()
    [[0.0, 0.0]]
    """
    s = np.clip(np.asarray(share, dtype=np.float64), 0.0, 1.0)
    s = s[:, None] if s.ndim == 1 else s
    out: np.ndarray = np.cos(np.pi * s / 2) * first + np.sin(np.pi * s / 2) * second
    return out
