"""The noisy-input replay runner on short streams."""

from __future__ import annotations

import argparse

import pytest

from app.replay import noisy_input


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--algorithm")
    noisy_input.add_arguments(parser.add_argument_group("noisy_input"))
    return parser.parse_args(list(argv))


def test_run_linear_reports_mse_and_copies_per_round() -> None:
    steps: list[int] = []
    result = noisy_input.run(_args("--dataset", "linear-gaussian", "--rounds", "300",
                                   "--kernel", "linear", "--input-noise", "1.0"), 0, steps.append)
    assert sum(steps) == 300 and result.metric == "mse" and result.rounds == 300
    assert result.extra["copies_per_round"] == 2.0  # two-copy special case
    assert result.curve[-1] == (300, pytest.approx(result.final))
    assert result.extra["window_ratio"] < 1.0


def test_run_classification_reports_error_rate() -> None:
    result = noisy_input.run(_args("--dataset", "moons", "--rounds", "200", "--kernel",
                                   "gaussian:1", "--loss", "exp"), 1, lambda n: None)
    assert result.metric == "error_rate" and 0.0 <= result.final <= 1.0
    assert result.extra["paper_expected_queries"] == pytest.approx(6.0)


def test_run_refuses_a_loss_of_the_wrong_kind() -> None:
    with pytest.raises(ValueError, match="classification"):
        noisy_input.run(_args("--dataset", "moons", "--rounds", "50", "--loss", "squared"),
                        0, lambda n: None)
