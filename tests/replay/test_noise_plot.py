"""The noise-estimate panels of a replay's plot, read from the matplotlib objects."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.replay.output import figure, summarise
from app.replay.result import ReplayResult

TRUTH = [{"slot": k, "theta": theta, "rho0": rho0, "rho1": 0.1}
         for k, (theta, rho0) in enumerate(((1.0, 0.2), (0.6, 0.12), (0.35, 0.06)))]


def _slot_estimate(t: int, shift: float) -> dict[str, Any]:
    """A published per-slot estimate at ``t``: the truth moved by ``shift``, +-0.05 intervals."""
    def around(v: float) -> list[float]:
        return [v - 0.05, v + 0.05]

    slots = [{"slot": r["slot"], "theta": r["theta"] - shift * r["slot"], "rho0": r["rho0"] + shift,
              "rho1": 0.1 + shift,
              "interval": {"theta": around(r["theta"]), "rho0": around(r["rho0"]),
                           "rho1": around(0.1)}} for r in TRUTH]
    return {"t": t, "status": "published", "reason": "", "rho0": slots[0]["rho0"],
            "rho1": slots[0]["rho1"], "interval": {"level": 0.95, "rho0": around(0.2),
                                                   "rho1": around(0.1)}, "slots": slots}


def _refused(t: int, reason: str) -> dict[str, Any]:
    return {"t": t, "status": "insufficient_data", "reason": reason, "rho0": None,
            "rho1": None, "slots": None}


def _run(estimates: list[dict[str, Any]], **extra: Any) -> ReplayResult:
    return ReplayResult("ridge_pl", "sim", 300, "gap_closed", 0.8,
                        [(1, 0.1), (100, 0.5), (300, 0.8)],
                        extra={"estimator": "anchor", "rho0": 0.2, "rho1": 0.1,
                               "noise_estimates": estimates, **extra})


@pytest.fixture
def close() -> Iterator[list[Any]]:
    import matplotlib.pyplot as plt

    figs: list[Any] = []
    yield figs
    for fig in figs:
        plt.close(fig)


def _labels(items: Any) -> list[str]:
    return [item.get_label() for item in items]


def test_per_slot_estimates_draw_theta_and_rho0_per_slot_with_truth_and_refusals(
        close: list[Any]) -> None:
    estimates = [_refused(100, "too_few_events"), _refused(200, "interval_too_wide"),
                 _slot_estimate(250, 0.01), _slot_estimate(300, -0.01)]
    fig = figure([summarise([_run(estimates, slot_noise_true=TRUTH)])])
    close.append(fig)
    _, theta, noise = fig.axes
    assert _labels(theta.containers) == ["θ slot 1 (true 0.6)", "θ slot 2 (true 0.35)"]
    assert _labels(noise.containers) == ["ρ0 slot 0 (true 0.2)", "ρ0 slot 1 (true 0.12)",
                                         "ρ0 slot 2 (true 0.06)", "ρ1 every slot (true 0.1)"]
    for ax, truth in ((theta, {0.6, 0.35}), (noise, {0.2, 0.12, 0.06, 0.1})):
        for bars in ax.containers:  # a point and a whisker at each published estimate
            (points, _, (whiskers,)) = bars
            assert len(points.get_xdata()) == 2 and len(whiskers.get_segments()) == 2
        dashed = {line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"}
        assert dashed == truth
        refused = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()
                   if line.get_label().startswith("not published")}
        assert refused == {"not published: too_few_events": [100],
                           "not published: interval_too_wide": [200]}
        assert ax.get_ylim()[0] == 0.0 and ax.get_xlabel() == "requests seen"
    slot1 = noise.containers[1][0]  # slot 1's points, its estimates in order
    assert list(slot1.get_ydata()) == pytest.approx([0.13, 0.11])


def test_label_estimates_keep_their_one_panel(close: list[Any]) -> None:
    """Estimates without per-slot rows: one panel of both rates, as before."""
    estimates = [{"t": 10, "status": "insufficient_data", "reason": "too_few_events",
                  "rho0": None, "rho1": None},
                 {"t": 50, "status": "published", "reason": "", "rho0": 0.21, "rho1": 0.12,
                  "interval": {"level": 0.95, "rho0": [0.15, 0.25], "rho1": [0.08, 0.15]}}]
    fig = figure([summarise([_run(estimates)])])
    close.append(fig)
    assert len(fig.axes) == 2
    assert tuple(fig.get_size_inches()) == pytest.approx((6.4, 4.4 * 1.8))
    ax = fig.axes[1]
    assert ax.get_title() == "noise estimates (anchor)" and ax.get_xlabel() == "events"
    assert _labels(ax.containers) == ["rho0 published (95% interval)",
                                      "rho1 published (95% interval)"]
    assert [(line.get_label(), line.get_linestyle()) for line in ax.get_lines()
            if not line.get_label().startswith("_")] == [("true rho0 0.2", ":"),
                                                         ("true rho1 0.1", ":")]
    assert [list(bars[0].get_xdata()) for bars in ax.containers] == [[50], [50]]
