"""``noisyloop replay --task rank`` over the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


@pytest.mark.slow
def test_replay_rank_writes_the_gap_closed_and_the_position_bias(tmp_path: Path) -> None:
    out = tmp_path / "rank.json"
    code = main(["replay", "--task", "rank", "--dataset", "sim", "--rounds", "6000",
                 "--learn-batch", "50", "--no-progress", "--json", str(out)])
    assert code == 0
    record = json.loads(out.read_text())
    assert record["task"] == "rank" and record["metric"] == "gap_closed"
    assert record["final_gap_closed"] > 0.6
    assert record["position_bias_max_error"] < 0.15
    assert record["new_item_score_correlation"] > 0.5


def test_replay_rank_refuses_a_bad_setting(capsys: object) -> None:
    assert main(["replay", "--task", "rank", "--dataset", "sim", "--position-bias", "1,0.5",
                 "--no-progress"]) == 2
    assert main(["replay", "--task", "rank", "--dataset", "digits", "--no-progress"]) == 2
