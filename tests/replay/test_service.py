"""``noisyloop replay --service``: the replay through a real service (uvicorn, Redis, trainer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from tests.client.conftest import Service, admin, api_key, service  # noqa: F401 (fixtures)

ROUNDS = 2000
ARGS = ["replay", "--dataset", "digits", "--algorithm", "rcnbf", "--rounds", str(ROUNDS),
        "--rho0", "0.05", "--rho1", "0.1", "--gamma", "0.5", "--feedback-delay", "25",
        "--seed", "3", "--no-progress"]


def late_error(report: dict[str, Any]) -> float:
    """Error rate of the greedy label over the rounds after the curve point nearest ROUNDS/2."""
    curve = {int(t): e for t, e in report["curve"]}
    half = max(t for t in curve if t <= ROUNDS // 2)
    return float((ROUNDS * curve[ROUNDS] - half * curve[half]) / (ROUNDS - half))


@pytest.mark.slow
def test_replay_through_service_learns_and_writes_the_same_fields(
        tmp_path: Path, service: Service, api_key: str) -> None:  # noqa: F811
    remote, local = tmp_path / "remote.json", tmp_path / "local.json"
    assert main([*ARGS, "--service", service.url, "--api-key", api_key,
                 "--json", str(remote)]) == 0
    assert main([*ARGS, "--json", str(local)]) == 0
    got, ref = json.loads(remote.read_text()), json.loads(local.read_text())
    assert set(got) - set(ref) == {"service"} and set(ref) <= set(got)
    assert got["params"] == ref["params"] and got["rounds"] == ROUNDS
    assert got["service"]["stats"]["events_applied"] == ROUNDS
    curve = {int(t): e for t, e in got["curve"]}
    early = curve[min(t for t in curve if t >= 100)]
    # learns: chance (0.9 on 10 classes) over the first rounds, far less in the second half
    # (0.56 measured; a Bernoulli error over 1,000 rounds has sd <= 0.016); the in-process
    # replay of the same stream (0.51) is the yardstick
    assert early > 0.8
    assert late_error(got) < 0.7
    assert abs(late_error(got) - late_error(ref)) < 0.15


@pytest.mark.parametrize("argv, message", [
    (["--service", "http://127.0.0.1:9"], "--api-key: is required with --service"),
    (["--api-key", "k"], "--api-key: is only used with --service"),
    (["--service", "http://127.0.0.1:9", "--api-key", "k", "--flip-rate", "0.1",
      "--task", "noisy_label"], "supports the tasks"),
])
def test_replay_service_options_refused(argv: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--dataset", "iris", "--algorithm", "perceptron", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_replay_through_service_runs_the_estimator_given(
        tmp_path: Path, service: Service, api_key: str) -> None:  # noqa: F811
    """``--estimator`` other than the service's default is set on the model (it was
    refused): the model's noise record names it."""
    out = tmp_path / "remote.json"
    assert main(["replay", "--dataset", "digits", "--algorithm", "rcnbf", "--rounds", "200",
                 "--rho0", "0.05", "--rho1", "0.1", "--feedback-delay", "100", "--seed", "3",
                 "--no-progress", "--estimator", "fixed", "--service", service.url,
                 "--api-key", api_key, "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["service"]["estimator"] == "fixed"
    assert got["service"]["stats"]["events_applied"] == 200
