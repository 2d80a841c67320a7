"""``noisyloop replay --task continuous``: the pricing world through a learner, its curve
and the final policy's share of the gap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.cli import main

ROUNDS = 2000


def _replay(tmp_path: Path, *argv: str) -> dict:
    out = tmp_path / "run.json"
    assert main(["replay", "--task", "continuous", "--dataset", "pricing", "--rounds",
                 str(ROUNDS), "--no-progress", "--json", str(out), *argv]) == 0
    summary: dict = json.loads(out.read_text())
    return summary


def test_replay_reports_the_gap_closed_by_the_prices_played(tmp_path: Path) -> None:
    summary = _replay(tmp_path, "--rho0", "0.05", "--rho1", "0.3")
    assert summary["metric"] == "price_gap_closed" and summary["algorithm"] == "ridge_ucb"
    final = summary["final_price_gap_closed"]
    assert summary["curve"][-1] == [ROUNDS, pytest.approx(final)]
    assert 0.5 < final < 1.0  # measured 0.72 at 2,000 rounds (seed 0)
    assert summary["gap_closed_greedy"] > final  # the final policy, without exploring


def test_replay_refuses_an_unknown_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--task", "continuous", "--dataset", "iris", "--rounds", "50",
                 "--no-progress"]) == 2
    assert "--dataset" in capsys.readouterr().err


#: Rounds of the regression world's replay and the share of the gap the default learner
#: must close online.  ``app.sim.actions.play`` of ``ridge_ucb`` at defaults, 5,000
#: contexts in batches of 10, seeds 0-7: 0.823, 0.803, 0.822, 0.780, 0.820, 0.815, 0.813,
#: 0.827 (mean 0.813, sd 0.015); 0.75 is 4 sd below the mean, a uniform policy's is 0.
REGRESSION_ROUNDS, REGRESSION_CLOSED = 5000, 0.75


def test_regression_world_replay_closes_the_gap_and_plots_the_learned_actions(
        tmp_path: Path) -> None:
    """``--dataset regression``: the dose-response world's noisy measurements; the default
    learner closes :data:`REGRESSION_CLOSED` of the gap, and the plot's second panel is the
    learned greedy action against the best per context."""
    import matplotlib.pyplot as plt

    from app.replay.output import figure, summarise
    from app.replay.result import ReplayResult

    out, png = tmp_path / "run.json", tmp_path / "run.png"
    assert main(["replay", "--task", "continuous", "--dataset", "regression", "--rounds",
                 str(REGRESSION_ROUNDS), "--no-progress", "--json", str(out),
                 "--plot", str(png)]) == 0
    summary = json.loads(out.read_text())
    assert summary["metric"] == "action_gap_closed" and summary["algorithm"] == "ridge_ucb"
    final = summary["final_action_gap_closed"]
    assert final >= REGRESSION_CLOSED, final
    assert png.stat().st_size > 0
    points = summary["learned_actions"]
    assert len(points["best"]) == len(points["greedy"]) == 400
    # the learned actions follow the best ones (a policy that ignored the context would not)
    assert np.corrcoef(points["best"], points["greedy"])[0, 1] > 0.9
    fig = figure([summarise([ReplayResult("ridge_ucb", "regression", 10, "action_gap_closed", 0.5,
                                          [(1, 0.1), (10, 0.5)],
                                          extra={"learned_actions": points})])])
    try:
        _, panel = fig.axes
        assert panel.get_xlabel() == "best action of the context"
        (scatter,) = panel.collections
        assert len(scatter.get_offsets()) == 400
    finally:
        plt.close(fig)


def test_regression_world_refuses_click_noise(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--task", "continuous", "--dataset", "regression", "--rounds",
                 "50", "--no-progress", "--rho0", "0.1", "--rho1", "0.1"]) == 2
    assert "--rho0" in capsys.readouterr().err
