"""The noisy_label replay runner: true-label error rate, given or gold-estimated confusion."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from app.learners.base import ParamError
from app.replay import noisy_label


def _args(**overrides: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    noisy_label.add_arguments(parser.add_argument_group())
    args = parser.parse_args([])
    args.dataset, args.algorithm, args.rounds = "circle", None, 1500
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def test_run_scores_against_true_labels_and_uses_true_confusion() -> None:
    done: list[int] = []
    result = noisy_label.run(_args(flip_to="next"), 0, done.append)
    assert sum(done) == 1500 and result.metric == "error_rate"
    assert result.extra["confusion_source"] == "given"
    assert result.extra["confusion_max_error"] == 0.0
    assert abs(result.extra["noisy_label_rate"] - 0.35) < 4 * np.sqrt(0.35 * 0.65 / 1500)
    assert result.curve[-1] == (1500, result.final)
    baseline = noisy_label.run(_args(flip_to="next", algorithm="perceptron"), 0, done.append)
    assert result.final < baseline.final


def test_run_estimates_confusion_from_gold_rows() -> None:
    args = _args(dataset="iris", flip_to="next", gold_fraction=0.5)
    result = noisy_label.run(args, 0, lambda n: None)
    assert result.extra["gold_labels"] == 75
    assert result.extra["confusion_source"] == "gold"
    assert result.extra["confusion_max_error"] < 0.2


def test_read_confusion_accepts_orientation_and_refuses_rows(tmp_path: Path) -> None:
    C = np.array([[0.8, 0.3, 0.0], [0.2, 0.6, 0.1], [0.0, 0.1, 0.9]])
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"matrix": C.T.tolist(), "orientation": "true_by_noisy"}))
    np.testing.assert_array_equal(noisy_label.read_confusion(path, 3), C)
    path.write_text(json.dumps(C.T.tolist()))
    with pytest.raises(ParamError, match="true_by_noisy"):
        noisy_label.read_confusion(path, 3)
