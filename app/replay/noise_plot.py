"""The noise-estimate panels of a replay's plot: each published estimate with its interval.

:func:`app.replay.output.plot` adds them below the learning curve when the
first run of a summary reports published ``noise_estimates``
(:mod:`app.replay.noise`):

* a label replay's estimates: one panel, both rates against the events seen,
  each published estimate a point with its interval as an error bar, the true
  rates as dotted lines.  Estimates that were not published are not drawn (the
  JSON lists them with their reason);
* a rank replay's per-slot estimates (their ``slots`` rows): one panel of the
  examination ``theta`` of each slot after slot 0 (slot 0 is 1 by definition)
  and one of each slot's false-click rate ``rho0`` with the shared missed-click
  rate ``rho1``, against the requests seen, as the console's per-slot charts
  show them: each published estimate a point with its interval as a whisker,
  the truth (``slot_noise_true``) as a dashed line of the same colour, and each
  estimate not published a small cross at the bottom, one legend entry per
  reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import cycle
from typing import Any

from app.replay.result import ReplayResult

#: Colours of the two rates (matplotlib's first two default colours).
RATE_COLOURS = {"rho0": "tab:blue", "rho1": "tab:orange"}
#: Colour of the missed-click rate all slots share in the per-slot panel (slot k draws in
#: matplotlib's k-th default colour).
SHARED_RHO1_COLOUR = "black"
#: Colour and marker of an estimate that was not published, one marker per reason (cycled).
REFUSED_COLOUR = "dimgray"
REFUSED_MARKERS = ("x", "+", "1", "|")
#: Offset between the points of neighbouring slots at one estimate, as a fraction of the
#: requests drawn, so that their whiskers do not cover each other.
SLOT_DODGE = 0.006


def published(run: ReplayResult) -> list[dict[str, Any]]:
    """The published noise estimates of ``run`` (empty when it reports none)."""
    return [e for e in run.extra.get("noise_estimates") or []
            if e.get("status") == "published" and e.get("rho0") is not None]


def slot_rows(run: ReplayResult) -> list[dict[str, Any]]:
    """The published estimates of ``run`` that carry per-slot ``slots`` rows."""
    return [e for e in published(run) if e.get("slots")]


def draw_points(ax: Any, t: Sequence[float], value: Sequence[float],
                bounds: Sequence[Sequence[float]], **style: Any) -> None:
    """``value`` against ``t`` as points with their ``(low, high)`` ``bounds`` as whiskers."""
    error = [[v - b[0] for v, b in zip(value, bounds, strict=True)],
             [b[1] - v for v, b in zip(value, bounds, strict=True)]]
    ax.errorbar(t, value, yerr=error, fmt=style.pop("fmt", "o"), markersize=3, capsize=2,
                alpha=0.8, **style)


def draw_estimates(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """Each run's published estimates of both rates with their intervals, and the truth."""
    first = runs[0]
    for rate, colour in RATE_COLOURS.items():
        for i, run in enumerate(runs):
            entries = published(run)
            value = [e[rate] for e in entries]
            bounds = [(e.get("interval") or {}).get(rate) or (e[rate], e[rate])
                      for e in entries]
            draw_points(ax, [e["t"] for e in entries], value, bounds, color=colour,
                        label=f"{rate} published (95% interval)" if i == 0 else None)
        if rate in first.extra:
            ax.axhline(first.extra[rate], color=colour, linestyle=":", linewidth=1,
                       label=f"true {rate} {first.extra[rate]:g}")
    ax.set_xlabel("events")
    ax.set_ylabel("noise rate")
    ax.set_ylim(bottom=0.0)
    ax.set_title(f"noise estimates ({first.extra.get('estimator', '')})", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def draw_slot_series(ax: Any, runs: Sequence[ReplayResult], key: str, symbol: str,
                     first_slot: int) -> None:
    """One series per slot from ``first_slot`` on: each run's published ``key`` (``theta``
    or ``rho0``) of that slot with its interval, and the slot's true value dashed."""
    truth = runs[0].extra.get("slot_noise_true") or []
    span = max(e["t"] for run in runs for e in run.extra["noise_estimates"])
    slots = len(slot_rows(runs[0])[0]["slots"])
    for k in range(first_slot, slots):
        colour = f"C{k}"
        true = truth[k][key] if k < len(truth) else None
        label = f"{symbol} slot {k}" + (f" (true {true:g})" if true is not None else "")
        dodge = (k - (slots - 1 + first_slot) / 2) * SLOT_DODGE * span
        for i, run in enumerate(runs):
            rows = [(e["t"], e["slots"][k]) for e in slot_rows(run)]
            draw_points(ax, [t + dodge for t, _ in rows], [r[key] for _, r in rows],
                        [r["interval"][key] for _, r in rows], color=colour,
                        label=label if i == 0 else None)
        if true is not None:
            ax.axhline(true, color=colour, linestyle="--", linewidth=1)


def draw_shared_rho1(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """Each run's published missed-click rate (one for every slot) with its interval, and the
    true one dashed."""
    truth = sorted({row["rho1"] for row in runs[0].extra.get("slot_noise_true") or []})
    label = "ρ1 every slot" + (f" (true {', '.join(f'{v:g}' for v in truth)})" if truth else "")
    for i, run in enumerate(runs):
        rows = [(e["t"], e["slots"][0]) for e in slot_rows(run)]
        draw_points(ax, [t for t, _ in rows], [r["rho1"] for _, r in rows],
                    [r["interval"]["rho1"] for _, r in rows], fmt="s",
                    color=SHARED_RHO1_COLOUR, label=label if i == 0 else None)
    for v in truth:
        ax.axhline(v, color=SHARED_RHO1_COLOUR, linestyle="--", linewidth=1)


def draw_refused(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """A small cross at the bottom of ``ax`` at each estimate that was not published, one
    marker and legend entry per reason."""
    reasons: dict[str, list[float]] = {}
    for run in runs:
        for e in run.extra.get("noise_estimates") or []:
            if e.get("status") != "published":
                reasons.setdefault(e.get("reason") or e.get("status", ""), []).append(e["t"])
    for (reason, t), marker in zip(reasons.items(), cycle(REFUSED_MARKERS)):
        ax.plot(t, [0.03] * len(t), marker, color=REFUSED_COLOUR, markersize=4,
                linestyle="none", transform=ax.get_xaxis_transform(),
                label=f"not published: {reason}")


def finish_slot_panel(ax: Any, runs: Sequence[ReplayResult], title: str, ylabel: str) -> None:
    """The crosses of :func:`draw_refused`, the labels and the legend of a per-slot panel."""
    draw_refused(ax, runs)
    level = slot_rows(runs[0])[0]["interval"]["level"]
    ax.set_title(f"{title}\npoints: published, {level:.0%} interval; dashed: truth",
                 fontsize=9)
    ax.set_xlabel("requests seen")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0.0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncols=2)


def draw_slot_theta(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """The examination ``theta`` per slot after slot 0 over the requests seen."""
    draw_slot_series(ax, runs, "theta", "θ", first_slot=1)
    finish_slot_panel(ax, runs, "examination θ per slot (slot 0 = 1)", "θ")


def draw_slot_noise(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """The false-click rate ``rho0`` per slot and the shared ``rho1`` over the requests seen."""
    draw_slot_series(ax, runs, "rho0", "ρ0", first_slot=0)
    draw_shared_rho1(ax, runs)
    finish_slot_panel(ax, runs, "click noise per slot: ρ0 (false click), ρ1 (missed click)",
                      "noise rate")


def add_estimates_panel(fig: Any, runs: Sequence[ReplayResult]) -> None:
    """Put the noise-estimate panels of ``runs`` below the one panel of ``fig``: those of
    :func:`draw_slot_theta` and :func:`draw_slot_noise` when the estimates carry per-slot
    rows, else the one of :func:`draw_estimates`."""
    draws: list[Callable[[Any, Sequence[ReplayResult]], None]] = (
        [draw_slot_theta, draw_slot_noise] if slot_rows(runs[0]) else [draw_estimates])
    (top,) = fig.axes
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height * (1.0 + 0.8 * len(draws)))
    grid = fig.add_gridspec(1 + len(draws), 1, height_ratios=(1.2,) + (1.0,) * len(draws))
    top.set_subplotspec(grid[0])
    for row, draw in enumerate(draws, start=1):
        draw(fig.add_subplot(grid[row]), runs)
