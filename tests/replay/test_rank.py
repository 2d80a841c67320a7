"""``noisyloop replay --task rank`` over the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main


def _replay(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "rank.json"
    assert main(["replay", "--task", "rank", "--dataset", "sim", "--no-progress",
                 "--json", str(out), *argv]) == 0
    record: dict[str, Any] = json.loads(out.read_text())
    return record


@pytest.mark.slow
def test_replay_rank_writes_the_gap_closed_and_the_new_item_scores(tmp_path: Path) -> None:
    record = _replay(tmp_path, "--rounds", "6000", "--learn-batch", "50")
    assert record["task"] == "rank" and record["metric"] == "gap_closed"
    assert record["final_gap_closed"] > 0.6
    assert record["new_item_score_correlation"] > 0.5


@pytest.mark.slow
def test_replay_rank_publishes_the_slot_estimate_of_a_trust_bias_stream(tmp_path: Path) -> None:
    record = _replay(tmp_path, "--rounds", "19000", "--learn-batch", "100",
                     "--trust", "0.2,0.12,0.06", "--click-noise", "0,0.1", "--binary")
    last = record["noise_estimate"]
    assert (last["status"], last["reason"], last["t"]) == ("published", "", 19_000)
    assert record["click_model"] == "trust" and record["estimator"] == "anchor"
    truth = record["slot_noise_true"]
    assert [row["rho0"] for row in truth] == [0.2, 0.12, 0.06]
    for row, true, error in zip(last["slots"], truth, record["slot_noise_error"], strict=True):
        for name in ("theta", "rho0", "rho1"):
            low, high = row["interval"][name]
            # a 95% interval is +-1.96 se wide: the truth within its width is within ~4 se
            assert abs(row[name] - true[name]) <= high - low + 1e-12, (row, true)
            assert error[name] == pytest.approx(row[name] - true[name])
    assert record["position_bias"] == [row["theta"] for row in last["slots"]]
    assert record["position_bias_source"] == "estimated"
    assert (record["rho0"], record["rho1"]) == (0.2, 0.1)  # slot 0's truth, for the plot


def test_replay_rank_short_reports_insufficient_data_with_its_reason(tmp_path: Path) -> None:
    record = _replay(tmp_path, "--rounds", "300", "--learn-batch", "20")
    last = record["noise_estimate"]
    assert (last["status"], last["reason"]) == ("insufficient_data", "too_few_events")
    assert last["t"] == 300 and last["slots"] is None
    assert record["position_bias"] == [1.0, 1.0, 1.0]
    assert record["position_bias_source"] == "insufficient_data"
    assert record["slot_noise_error"] is None
    assert record["params"]["anchor_share"] == 0.03  # the service's default for the model


def test_replay_rank_fixed_estimator_gives_the_rates_and_estimates_nothing(
        tmp_path: Path) -> None:
    record = _replay(tmp_path, "--rounds", "200", "--estimator", "fixed")
    assert record["estimator"] == "fixed" and "noise_estimates" not in record
    assert record["click_model"] == "flips" and record["click_noise"] == [0.03, 0.3]
    assert record["position_bias_source"] == "insufficient_data"


@pytest.mark.parametrize(("argv", "message"), [
    (["--position-bias", "1,0.5"], "--position-bias"),
    (["--dataset", "digits"], "--dataset"),
    (["--trust", "0.2,0.1"], "--trust: give one rate in [0, 1) per slot (3)"),
    (["--trust", "0.2,0.1,1.0"], "--trust: give one rate in [0, 1) per slot (3)"),
    (["--estimator", "nrest"], "--estimator: 'nrest' cannot estimate"),
])
def test_replay_rank_refuses_a_bad_setting(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    dataset = [] if "--dataset" in argv else ["--dataset", "sim"]
    assert main(["replay", "--task", "rank", *dataset, "--rounds", "50", "--no-progress",
                 *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--trust", "0.1,0.1,0.1"], ["--binary"]])
def test_replay_rank_options_are_refused_by_other_tasks(
        option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--dataset", "iris", "--algorithm", "rcnbf", "--rounds", "50",
                 "--no-progress", *option]) == 2
    assert "is an option of the rank task" in capsys.readouterr().err


def test_replay_rank_explains_gap_closed_and_its_final_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``final_rounds`` (min(5,000, rounds / 6): 100 of 600) is said in words in the output,
    the JSON and the plot's legend; the metric is explained under the summary line and the
    plot's y axis names it as a formula, not as ``gap_closed``."""
    pytest.importorskip("matplotlib")
    from app.replay import rank
    from app.replay.output import figure, from_json_dict

    record = _replay(tmp_path, "--rounds", "600", "--learn-batch", "50", "--estimator",
                     "fixed")
    out = capsys.readouterr().out
    over = "the last 100 of 600 rounds (min(5,000, rounds / 6)"
    assert record["final_rounds"] == 100 and record["final_over"].startswith(over)
    assert f"(mean over {over}" in out
    assert "share of the gap between a random ranking and the oracle" in out
    assert "sum(played - random) / sum(oracle - random)" in out
    fig = figure([from_json_dict(record)])
    try:
        ax = fig.axes[0]
        assert ax.get_ylabel() == (f"gap closed, last {rank.WINDOW:,} rounds:\n"
                                   "(played - random) / (oracle - random)")
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend[0].endswith("final " + f"{record['final_gap_closed']:.3g}"
                                  + ", last 100 rounds)")
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
