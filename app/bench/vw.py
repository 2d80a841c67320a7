"""Vowpal Wabbit's Python binding on the benchmark stream (the ``bench`` extra).

Two reductions: ``--cb_explore K`` (one example line per round, actions
``1..K``) and ``--cb_explore_adf -q sa`` (a shared context namespace ``s``
and one action line per label in namespace ``a``, crossed quadratically).
VW's cost is ``1 - click``; the played action is drawn from VW's pmf with
our generator and its probability is logged, as VW's contextual-bandit
format asks.

Turning a numpy row into VW's text format is part of using VW from Python,
so it is timed separately (:func:`vw_text`) and reported both ways.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def vw_available() -> bool:
    """True when the ``vowpalwabbit`` package imports."""
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return False
    return True


def vw_text(x: np.ndarray, adf: bool) -> str:
    """One context in VW text format (non-zero features ``index:value`` in namespace ``s``)."""
    feats = " ".join(f"{j}:{v:.6g}" for j, v in zip(np.flatnonzero(x).tolist(),
                                                     x[x != 0.0].tolist(), strict=True))
    return f"shared |s {feats}" if adf else f"|s {feats}"


class VWBandit:
    """A VW contextual-bandit workspace behind a ``predict`` / ``learn`` pair on text.

    ``predict(text, u)`` returns the played action (0-based) and its
    probability, drawing with the uniform ``u``; ``learn(text, action, cost,
    prob)`` teaches VW that outcome.
    """

    def __init__(self, n_classes: int, seed: int, adf: bool) -> None:
        import vowpalwabbit

        self.k = n_classes
        self.adf = adf
        args = "--cb_explore_adf -q sa" if adf else f"--cb_explore {n_classes}"
        self.args = args
        self.vw: Any = vowpalwabbit.Workspace(f"{args} --quiet --random_seed {seed}")
        self.actions = [f"|a a{k}" for k in range(n_classes)]

    def predict(self, text: str, u: float) -> tuple[int, float]:
        pmf = self.vw.predict([text, *self.actions] if self.adf else text)
        total = 0.0
        norm = sum(pmf)
        for a, p in enumerate(pmf):
            total += p / norm
            if u < total:
                return a, p / norm
        return self.k - 1, pmf[-1] / norm

    def learn(self, text: str, action: int, cost: float, prob: float) -> None:
        if self.adf:
            lines = [f"0:{cost}:{prob} {act}" if k == action else act
                     for k, act in enumerate(self.actions)]
            self.vw.learn([text, *lines])
        else:
            self.vw.learn(f"{action + 1}:{cost}:{prob} {text}")

    def finish(self) -> None:
        self.vw.finish()
