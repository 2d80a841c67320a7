"""Tests of the regression replay runner."""

from __future__ import annotations

import argparse

import pytest

from app.replay import regression


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="linear-gaussian")
    parser.add_argument("--algorithm", default=None)
    parser.add_argument("--rounds", type=int, default=1500)
    regression.add_arguments(parser.add_argument_group("regression"))
    return parser.parse_args(list(argv))


def test_run_reports_mse_curve_and_progress() -> None:
    ticks: list[int] = []
    result = regression.run(_args("--noise-variance-max", "1"), 0, ticks.append)
    assert sum(ticks) == 1500
    assert result.algorithm == "ors" and result.metric == "mse" and result.rounds == 1500
    assert result.curve[-1] == (1500, pytest.approx(result.final))
    early = dict(result.curve)[min(t for t, _ in result.curve if t >= 150)]
    assert result.extra["final_window_mse"] < early / 4          # it learns
    assert result.extra["labels_used"] == 1500
    assert result.params == {"r": 30.0}


def test_run_is_reproducible_with_seed() -> None:
    args = _args("--algorithm", "nlms", "--rounds", "300")
    assert regression.run(args, 5, lambda n: None) == regression.run(args, 5, lambda n: None)


def test_run_budget_stays_within_budget() -> None:
    args = _args("--budget", "2", "--budget-strategy", "auto_self_tuned", "--r", "10",
                 "--alpha-rule", "pred", "--known-variance")
    result = regression.run(args, 1, lambda n: None)
    assert 1500 < result.extra["labels_used"] <= 3000
    trace = result.extra["budget_trace"]
    assert len(trace) == 15 and all(p["running_budget"] <= 2.0 for p in trace)
    assert result.params == {"r": 10.0, "alpha_rule": "pred"}


def test_run_channel_with_nlms_ignores_ors_options() -> None:
    args = _args("--dataset", "channel", "--algorithm", "nlms", "--beta", "2", "--rounds", "200")
    result = regression.run(args, 0, lambda n: None)
    assert result.params == {"r": 30.0} and result.dataset == "channel"
