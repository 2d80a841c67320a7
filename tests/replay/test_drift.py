"""``noisyloop replay --drift``: the label and rank replays in a changing world."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


@pytest.mark.slow
def test_label_replay_reports_recovery_detection_and_plots(tmp_path: Path) -> None:
    out, png = tmp_path / "run.json", tmp_path / "run.png"
    assert main(["replay", "--task", "label", "--algorithm", "linucb_diag", "--dataset",
                 "digits", "--rounds", "9000", "--drift", "abrupt", "--change-at", "1500",
                 "--feedback-delay", "100", "--params", '{"half_life": 700}', "--no-progress",
                 "--json", str(out), "--plot", str(png)]) == 0
    extra = json.loads(out.read_text())["runs"][0]["extra"]
    assert (extra["drift"], extra["change_at"]) == ("abrupt", 1500)
    # the played label is right about half the time before the change (the model is still
    # learning) and ~0 right after it: the service's detector, its strata mostly still
    # warming up and so compared with all events, sees the fall within 266 events
    assert 0 <= extra["detection_delay"] <= 300 and extra["false_alarms"] == 0
    assert extra["gap_closed_after_change"] > 0.7  # forgets (0.85 measured)
    assert len(extra["online_curve"]) == 200
    assert png.stat().st_size > 0


def test_rank_replay_takes_a_drift(tmp_path: Path) -> None:
    out = tmp_path / "rank.json"
    assert main(["replay", "--task", "rank", "--dataset", "sim", "--rounds", "1500",
                 "--drift", "churn", "--change-at", "500", "--drift-span", "200",
                 "--learn-batch", "50", "--no-progress", "--json", str(out)]) == 0
    extra = json.loads(out.read_text())["runs"][0]["extra"]
    assert extra["drift"] == "churn" and extra["gap_closed_after_change"] is None
    assert -1.0 < extra["gap_closed_tail"] <= 1.0


@pytest.mark.parametrize(("argv", "message"), [
    (["--algorithm", "ors", "--dataset", "synsep", "--task", "regression", "--drift",
      "abrupt"], "--drift: applies to the tasks"),
    (["--algorithm", "linucb_diag", "--dataset", "iris", "--drift", "gradual",
      "--drift-span", "0"], "--drift-span: span must be >= 1"),
])
def test_replay_refuses_a_drift_it_cannot_run(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--rounds", "10", "--no-progress", *argv]) == 2
    assert message in capsys.readouterr().err
