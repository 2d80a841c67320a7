"""The learned-action panel of a continuous replay's plot: each scored context's final greedy
action against its best action.

:func:`app.replay.output.plot` adds it below the learning curve when the first run of a
summary reports ``learned_actions`` (:mod:`app.replay.continuous`): a point per context
(up to :data:`POINTS` of the fresh contexts the final policy was scored on), the best action
on the horizontal axis and the learned greedy action on the vertical one; the diagonal is a
policy that plays every context's best action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.replay.result import ReplayResult

#: Contexts a run keeps for the panel.
POINTS = 400


def learned_actions(best: np.ndarray, greedy: np.ndarray) -> dict[str, list[float]]:
    """The first :data:`POINTS` contexts' best and greedy actions, as a run's
    ``extra["learned_actions"]``."""
    return {"best": [float(v) for v in best[:POINTS]],
            "greedy": [float(v) for v in greedy[:POINTS]]}


def reports_actions(run: ReplayResult) -> bool:
    """Whether ``run`` reports ``learned_actions``."""
    return bool(run.extra.get("learned_actions"))


def add_actions_panel(fig: Any, runs: Sequence[ReplayResult]) -> None:
    """Put the panel of the module docstring below the one panel of ``fig`` (every run's
    points, one colour per seed)."""
    (top,) = fig.axes
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height * 1.9)
    grid = fig.add_gridspec(2, 1, height_ratios=(1.2, 1.0))
    top.set_subplotspec(grid[0])
    ax = fig.add_subplot(grid[1])
    lows, highs = [], []
    for run in runs:
        points = run.extra["learned_actions"]
        ax.scatter(points["best"], points["greedy"], s=6, alpha=0.5, label=f"seed {run.seed}")
        lows.append(min(points["best"] + points["greedy"]))
        highs.append(max(points["best"] + points["greedy"]))
    lo, hi = min(lows), max(highs)
    ax.plot([lo, hi], [lo, hi], color="black", linestyle=":", label="best")
    ax.set(xlabel="best action of the context", ylabel="learned (greedy) action",
           title="the learned action against the best, per context")
    ax.legend(fontsize=8)
