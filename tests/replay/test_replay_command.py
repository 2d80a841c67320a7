"""``noisyloop replay`` end to end: JSON, plot, repeats, task inference, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


def test_replay_writes_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(["replay", "--dataset", "iris", "--algorithm", "rcnbf", "--rounds", "400",
                 "--rho0", "0.1", "--rho1", "0.2", "--gamma", "0.3", "--repeats", "2",
                 "--seed", "4", "--estimator", "fixed", "--json", str(out), "--plot", str(png)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["algorithm"] == "rcnbf" and data["dataset"] == "iris"
    assert data["rounds"] == 400 and data["task"] == "label" and data["seeds"] == [4, 5]
    assert data["curve"][-1][0] == 400
    finals = [r["final_error_rate"] for r in data["runs"]]
    assert data["final_error_rate"] == pytest.approx(sum(finals) / 2)
    assert data["params"] == {"gamma": 0.3, "rho0": 0.1, "rho1": 0.2}
    assert data["chance_error_rate"] == pytest.approx(2 / 3)  # iris: 3 classes
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "rounds/s" in capsys.readouterr().out


def test_replay_rcine_json_has_noise_estimates(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["replay", "--dataset", "iris", "--algorithm", "rcine", "--rounds", "300",
                 "--rho0", "0.1", "--rho1", "0.2", "--n-s", "150", "--estimator", "nrest",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [e["t"] for e in data["noise_estimates"]] == [150, 300]
    assert {"t", "rho0", "rho1", "status", "reason", "interval"} <= (
        data["noise_estimates"][0].keys())


@pytest.mark.slow
def test_replay_at_defaults_runs_the_services_estimator(tmp_path: Path) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["replay", "--dataset", "iris", "--algorithm", "linucb_diag", "--rounds",
                 "5000", "--rho0", "0.1", "--rho1", "0.2", "--no-progress", "--json", str(out),
                 "--plot", str(png)]) == 0
    data = json.loads(out.read_text())
    assert data["estimator"] == "anchor" and "rho0" not in data["params"]
    assert [e["t"] for e in data["noise_estimates"]] == [2500, 5000]
    for e in data["noise_estimates"]:
        assert e["status"] in ("published", "insufficient_data") and e["n_events"] == e["t"]
        assert (e["rho0"] is None) == (e["status"] != "published")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_replay_infers_task_from_options(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["replay", "--dataset", "iris", "--algorithm", "perceptron", "--rounds", "200",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["task"] == "label"
    assert main(["replay", "--dataset", "iris", "--algorithm", "perceptron", "--rounds", "200",
                 "--flip-rate", "0.2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["task"] == "noisy_label"


@pytest.mark.parametrize("argv, message", [
    (["--algorithm", "nope"], "unknown algorithm 'nope'"),
    ([], "give --algorithm"),
    (["--algorithm", "rcnbf", "--api-key", "k"], "--api-key"),
    (["--algorithm", "rcnbf", "--flip-rate", "0.2"], "option of the noisy_label task"),
    (["--algorithm", "rcnbf", "--task", "label_set"], "does not fit task 'label_set'"),
    (["--algorithm", "rcnbf", "--n-s", "100"], "--n-s: does not apply to 'rcnbf'"),
    (["--algorithm", "rcnbf", "--repeats", "0"], "--repeats: must be >= 1"),
    (["--algorithm", "rcnbf", "--rho0", "0.6", "--rho1", "0.6"], "1 - rho0 - rho1"),
    (["--algorithm", "rcnbf", "--params", '{"bogus": 1}'], "unknown parameter"),
    (["--algorithm", "rcnbf", "--estimator", "nrest"], "--estimator: 'nrest' cannot"),
    (["--dataset", "/no/such.csv", "--algorithm", "rcnbf"], "neither a known name"),
])
def test_replay_errors_are_clear(argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    dataset = [] if "--dataset" in argv else ["--dataset", "iris"]
    assert main(["replay", *dataset, "--rounds", "50", *argv]) == 2
    assert message in capsys.readouterr().err


def test_replay_params_must_be_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["replay", "--dataset", "iris", "--algorithm", "rcnbf", "--params", "[1]"])
    assert info.value.code == 2
    assert "JSON object" in capsys.readouterr().err


@pytest.mark.parametrize(("task_args", "params"), [
    (["--algorithm", "ors", "--dataset", "linear-gaussian"], {"r": 5.0}),
    (["--algorithm", "uma", "--dataset", "circle", "--flip-to", "next"], {"alpha": 0.5}),
    (["--algorithm", "kernel_ogd", "--dataset", "linear-gaussian", "--kernel", "linear"],
     {"eta": 0.05}),
])
def test_replay_params_reach_every_task_runner(tmp_path: Path, task_args: list[str],
                                                params: dict[str, float]) -> None:
    out = tmp_path / "r.json"
    assert main(["replay", *task_args, "--rounds", "200", "--no-progress",
                 "--params", json.dumps(params), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["params"].items() >= params.items()


def test_replay_params_unknown_name_refused_by_regression_runner(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--algorithm", "ors", "--dataset", "linear-gaussian", "--rounds",
                 "50", "--no-progress", "--params", '{"bogus": 1}'])
    assert code == 2 and "unknown parameter" in capsys.readouterr().err
