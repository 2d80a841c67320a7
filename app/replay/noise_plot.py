"""The noise-estimate panel of a replay's plot: each published estimate with its interval.

:func:`app.replay.output.plot` adds it below the learning curve when the
first run of a summary reports published ``noise_estimates``
(:mod:`app.replay.noise`): both rates against the events seen, each
published estimate a point with its interval as an error bar, the true rates
as dotted lines.  Estimates that were not published are not drawn (the
service shows none either; the JSON lists them with their reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.replay.result import ReplayResult

#: Colours of the two rates (matplotlib's first two default colours).
RATE_COLOURS = {"rho0": "tab:blue", "rho1": "tab:orange"}


def published(run: ReplayResult) -> list[dict[str, Any]]:
    """The published noise estimates of ``run`` (empty when it reports none)."""
    return [e for e in run.extra.get("noise_estimates") or []
            if e.get("status") == "published" and e.get("rho0") is not None]


def draw_estimates(ax: Any, runs: Sequence[ReplayResult]) -> None:
    """Each run's published estimates of both rates with their intervals, and the truth."""
    first = runs[0]
    for rate, colour in RATE_COLOURS.items():
        for i, run in enumerate(runs):
            entries = published(run)
            t = [e["t"] for e in entries]
            value = [e[rate] for e in entries]
            bounds = [(e.get("interval") or {}).get(rate) or (e[rate], e[rate])
                      for e in entries]
            error = [[v - b[0] for v, b in zip(value, bounds, strict=True)],
                     [b[1] - v for v, b in zip(value, bounds, strict=True)]]
            ax.errorbar(t, value, yerr=error, fmt="o", markersize=3, capsize=2, color=colour,
                        alpha=0.8, label=f"{rate} published (95% interval)" if i == 0 else None)
        if rate in first.extra:
            ax.axhline(first.extra[rate], color=colour, linestyle=":", linewidth=1,
                       label=f"true {rate} {first.extra[rate]:g}")
    ax.set_xlabel("events")
    ax.set_ylabel("noise rate")
    ax.set_ylim(bottom=0.0)
    ax.set_title(f"noise estimates ({first.extra.get('estimator', '')})", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def add_estimates_panel(fig: Any, runs: Sequence[ReplayResult]) -> None:
    """Put :func:`draw_estimates` of ``runs`` below the one panel of ``fig``."""
    (top,) = fig.axes
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height * 1.8)
    grid = fig.add_gridspec(2, 1, height_ratios=(1.2, 1.0))
    top.set_subplotspec(grid[0])
    draw_estimates(fig.add_subplot(grid[1]), runs)
