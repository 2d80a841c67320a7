"""``replay --drift``: the options of a changing world and what a run reports about it.

``--drift abrupt|gradual|churn`` (``none``: stationary) with ``--change-at``
and ``--drift-span`` moves the stream of the ``label`` and ``rank`` replays
to a second world (:class:`app.sim.drift.Drift`).  A run then reports,
besides its task's metric, the online reward as the share of the
random-to-oracle gap closed over a sliding window of :data:`WINDOW` rounds
(its curve, drawn on linear axes with the change marked) and the windows
the acceptance reads (:func:`drift_report`): the share closed over rounds
2,500-7,500 after the change, and over the last 5,000 rounds.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.learners.base import ParamError
from app.learners.drift import PageHinkley
from app.replay.output import save_figure
from app.replay.result import ReplayResult
from app.sim.drift import DEFAULT_CHANGE_AT, DEFAULT_SPAN, DRIFTS, Drift
from app.sim.rank import gap_closed

#: Rounds of the sliding window of the online-reward curve.
WINDOW = 1_000
#: Points of that curve.
CURVE_POINTS = 200
#: Rounds after the change over which recovery is measured: ``[start, stop)``.
RECOVERY = (2_500, 7_500)
#: Last rounds of a run over which the stationary cost is measured.
TAIL = 5_000


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """``--drift``, ``--change-at`` and ``--drift-span``."""
    group.add_argument("--drift", choices=DRIFTS, default="none",
                       help="move the stream to a second world (label and rank "
                            "tasks; default none)")
    group.add_argument("--change-at", type=int, default=DEFAULT_CHANGE_AT, metavar="T",
                       help=f"round of the change (default {DEFAULT_CHANGE_AT:,})")
    group.add_argument("--drift-span", type=int, default=DEFAULT_SPAN, metavar="S",
                       help="rounds of a gradual ramp, or between two replacements under "
                            f"churn (default {DEFAULT_SPAN:,})")


def schedule(args: argparse.Namespace) -> Drift:
    """The :class:`Drift` of ``args`` (ParamError naming the option on a bad value)."""
    try:
        return Drift(getattr(args, "drift", "none"),
                     int(getattr(args, "change_at", DEFAULT_CHANGE_AT)),
                     int(getattr(args, "drift_span", DEFAULT_SPAN)))
    except ValueError as exc:
        flag = next((f for name, f in (("change_at", "--change-at"), ("span", "--drift-span"))
                     if str(exc).startswith(name)), "--drift")
        raise ParamError(flag, str(exc)) from None


def check_task(args: argparse.Namespace, task: str, drifting: tuple[str, ...]) -> None:
    """Refuse ``--drift`` for a task whose replay has no second world (not among
    ``drifting``), and for a log."""
    if getattr(args, "drift", "none") == "none":
        return
    if task not in drifting:
        raise ParamError("--drift", f"applies to the tasks {drifting}, not {task!r}")
    schedule(args)


def online_curve(played: np.ndarray, oracle: np.ndarray, random: np.ndarray
                 ) -> list[tuple[int, float]]:
    """Share of the gap closed over the last :data:`WINDOW` rounds, at evenly spaced rounds."""
    rounds = played.shape[0]
    points = np.unique(np.linspace(1, rounds, min(CURVE_POINTS, rounds)).astype(int))
    return [(int(p), gap_closed(played[max(0, p - WINDOW):p], oracle[max(0, p - WINDOW):p],
                                random[max(0, p - WINDOW):p])) for p in points]


def drift_report(drift: Drift, played: np.ndarray, oracle: np.ndarray, random: np.ndarray,
                 signal: np.ndarray, strata: np.ndarray | None = None) -> dict[str, Any]:
    """The drift fields of a run's ``extra``: the schedule, the share of the gap closed over
    rounds ``change_at + RECOVERY`` (None when the run is too short) and over the last
    :data:`TAIL` rounds, the online-reward curve, and the detections of the service's
    detector (:class:`~app.learners.drift.PageHinkley`) on ``signal``, the observed click
    of each round, in its ``strata`` (None: one) (rounds; the delay of the first at or
    after the change; those before it are false alarms)."""
    rounds = played.shape[0]
    detections = [t - 1 for t in PageHinkley().update(signal, strata).detected_at]
    after = [t for t in detections if t >= drift.change_at]
    start, stop = drift.change_at + RECOVERY[0], drift.change_at + RECOVERY[1]
    window = slice(start, stop)
    tail = slice(max(0, rounds - TAIL), rounds)
    return {
        "drift": drift.kind, "change_at": drift.change_at, "drift_span": drift.span,
        "gap_closed_after_change": (gap_closed(played[window], oracle[window], random[window])
                                    if stop <= rounds else None),
        "gap_closed_tail": gap_closed(played[tail], oracle[tail], random[tail]),
        "online_curve": online_curve(played, oracle, random),
        "detections": detections,
        "detection_delay": after[0] - drift.change_at if after else None,
        "false_alarms": len(detections) - len(after),
    }


def plot_online(runs: Sequence[ReplayResult], path: str | Path, title: str) -> None:
    """PNG of the online-reward curves of drift runs (linear axes): the change as a dashed
    line, each run's detections as ticks at the top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    try:
        for run in runs:
            t, share = zip(*run.extra["online_curve"], strict=True)
            (line,) = ax.plot(t, share, label=f"{run.algorithm} seed {run.seed}")
            marks = run.extra["detections"]
            ax.plot(marks, [1.02] * len(marks), "v", color=line.get_color(), markersize=6)
        first = runs[0].extra
        ax.axvline(first["change_at"], color="grey", linestyle="--", linewidth=1,
                   label=f"change ({first['drift']})")
        ax.set(xlabel="rounds", ylim=(min(-0.05, ax.get_ylim()[0]), 1.06),
               ylabel=f"share of the gap closed (last {WINDOW:,} rounds)")
        ax.set_title(f"{title}\n▼ drift detected", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        save_figure(fig, path)
    finally:
        plt.close(fig)
