"""Replay output: averaging repeats, the JSON summary, the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.replay.output import figure, plot, run_repeats, summarise, to_json_dict, write_json
from app.replay.result import ReplayResult


def _result(seed: int, values: list[float], **extra: object) -> ReplayResult:
    curve = [(t, v) for t, v in zip([1, 10, 100], values, strict=True)]
    return ReplayResult("rcine", "synsep", 100, "error_rate", values[-1], curve, seed=seed,
                        params={"gamma": 0.1}, extra=dict(extra))


def test_summarise_averages_runs() -> None:
    runs = [_result(0, [1.0, 0.5, 0.2], played=0.3, delay=1),
            _result(1, [1.0, 0.7, 0.4], played=0.5, delay=1)]
    s = summarise(runs, task="label", seconds=2.0)
    np.testing.assert_allclose(s.mean, [1.0, 0.6, 0.3])
    np.testing.assert_allclose(s.std, [0.0, 0.1, 0.1])
    assert s.final == pytest.approx(0.3) and s.final_std == pytest.approx(0.1)
    assert s.seeds == [0, 1]


def test_summarise_different_curves_refused() -> None:
    other = ReplayResult("rcine", "synsep", 50, "error_rate", 0.1, [(1, 1.0), (50, 0.1)])
    with pytest.raises(ValueError, match="different curve points"):
        summarise([_result(0, [1.0, 0.5, 0.2]), other])


def test_to_json_dict_fields_and_extras() -> None:
    estimates = [{"t": 10, "rho0": 0.2, "rho1": 0.4}]
    runs = [_result(0, [1.0, 0.5, 0.2], played=0.3, delay=1, noise_estimates=estimates),
            _result(1, [1.0, 0.7, 0.4], played=0.5, delay=1, noise_estimates=[])]
    d = to_json_dict(summarise(runs, task="label"))
    assert {"algorithm", "dataset", "rounds", "final_error_rate", "curve"} <= d.keys()
    assert d["curve"] == [[1, 1.0], [10, 0.6], [100, pytest.approx(0.3)]]
    assert d["final_error_rate"] == pytest.approx(0.3) and d["repeats"] == 2
    assert d["played"] == pytest.approx(0.4)       # differing numbers: mean over runs
    assert d["delay"] == 1                         # equal numbers kept as they are
    assert d["noise_estimates"] == estimates       # first run's
    assert [r["seed"] for r in d["runs"]] == [0, 1]
    assert d["seconds"] is None                    # NaN is not JSON


def test_write_json_strict(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_json(summarise([_result(0, [1.0, 0.5, math.nan])]), path)
    data = json.loads(path.read_text())
    assert data["curve"][2] == [100, None] and data["final_error_rate"] is None


def test_plot_writes_png(tmp_path: Path) -> None:
    a = summarise([_result(0, [1.0, 0.5, 0.2]), _result(1, [1.0, 0.7, 0.4])])
    path = tmp_path / "curve.png"
    plot([a], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _chance_lines(fig: Any) -> list[Any]:
    return [line for line in fig.axes[0].get_lines() if line.get_label().startswith("chance")]


def test_plot_title_gives_noise_rates_and_step_size_and_a_line_marks_chance() -> None:
    import matplotlib.pyplot as plt

    runs = [_result(seed, [1.0, 0.5, 0.2], rho0=0.2, rho1=0.4, chance_error_rate=0.9)
            for seed in (0, 1)]
    fig = figure([summarise(runs)])
    try:
        title = fig.axes[0].get_title()
        assert "ρ0 = 0.2, ρ1 = 0.4" in title and "γ = 0.1" in title
        (chance,) = _chance_lines(fig)
        assert set(chance.get_ydata()) == {0.9} and "1 - 1/K = 0.9" in chance.get_label()
        assert chance.get_label() in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    finally:
        plt.close(fig)


def test_plot_without_a_chance_level_draws_none_and_names_each_curves_step() -> None:
    """Regression has no chance level; curves with different step sizes each name theirs."""
    import matplotlib.pyplot as plt

    ors = ReplayResult("ors", "friedman", 100, "mse", 0.2, [(1, 1.0), (100, 0.2)],
                       params={"eta": 0.5}, extra={"noise_variance_max": 2.0})
    nlms = ReplayResult("nlms", "friedman", 100, "mse", 0.3, [(1, 1.0), (100, 0.3)],
                        params={"eta": 0.05}, extra={"noise_variance_max": 2.0})
    fig = figure([summarise([ors]), summarise([nlms])])
    try:
        assert _chance_lines(fig) == []
        title = fig.axes[0].get_title()
        assert "ors: label noise variance <= 2, η = 0.5" in title
        assert "nlms: label noise variance <= 2, η = 0.05" in title
    finally:
        plt.close(fig)


def test_run_repeats_uses_consecutive_seeds() -> None:
    seen: list[int] = []

    def runner(seed: int, progress: object) -> ReplayResult:
        seen.append(seed)
        return _result(seed, [1.0, 0.5, 0.2])

    assert [r.seed for r in run_repeats(runner, 5, 3, lambda n: None)] == [5, 6, 7]
    assert seen == [5, 6, 7]


def test_plot_axes_of_a_share_and_of_a_widely_spread_loss_stay_within_the_data() -> None:
    """A share of a gap (negative in a run's first rounds) is drawn on a linear axis; a loss
    whose runs spread wider than their mean keeps its log axis, its band stopping at the
    lowest value a run took (it went down to 1e-281 when the band fell below zero)."""
    import matplotlib.pyplot as plt

    share = [ReplayResult("ridge_pl", "sim", 100, "gap_closed", v[-1],
                          list(zip([1, 10, 100], v, strict=True)), seed=seed)
             for seed, v in enumerate(([-3.0, 0.4, 0.9], [4.0, 0.6, 0.9], [0.5, 0.5, 0.88]))]
    loss = [_result(seed, v) for seed, v in enumerate(([0.01, 0.5, 0.2], [3.0, 0.1, 0.25]))]
    for runs, scale, bottom in ((share, "linear", -5.0), (loss, "log", 0.005)):
        fig = figure([summarise(runs)])
        try:
            ax = fig.axes[0]
            assert ax.get_yscale() == scale
            low, high = ax.get_ylim()
            assert bottom < low and high < 10, (scale, low, high)
        finally:
            plt.close(fig)
