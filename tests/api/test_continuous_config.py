"""A configuration's evaluation on a continuous model's decision log, through the service
and the command line: ``POST /v1/models/{id}/evaluations`` with ``{"algorithm", "params"}``
run by the jobs role, and ``noisyloop evaluate --policy config:JSON`` on the export."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from app.cli import main
from app.commands.log_parquet import write_pages
from app.evaluation.smoothed import smoothed_evaluation
from app.evaluation.training import BATCH
from app.learners.registry import build, learner_class
from app.learners.smoothing import ContinuousBandit, window
from app.sim.pricing import PricingWorld
from tests.api.conftest import TestClient, new_model
from tests.api.test_continuous import RANGE, RHO0, RHO1, ROUNDS, _model, _priced, evaluate

CONFIG: dict[str, Any] = {"algorithm": "cats", "params": {"bandwidth": 2.0}}
#: The logging model's exploration: every price uniform, so that the configuration's
#: windows (4 of the range's 10) hold enough logged prices to be scored (an ESS near
#: 0.4 * 400 = 160 of the 400 evaluated events, above the 100 that flags a value).
LOG_EPSILON = 1.0


def _expected(lines: list[dict[str, Any]], train: int) -> Any:
    """The configuration trained on the first ``train`` logged events by the learner's own
    calls (in steps of the trainer's batch, clicks corrected at the model's rates), its
    greedy price smoothed with its half-width scored on the rest in memory."""
    X = np.array([line["features"] for line in lines])
    prices = np.array([line["context"]["action"] for line in lines])
    pdf = np.array([line["context"]["pdf"] for line in lines])
    raw = np.array([line["feedback"]["reward"] for line in lines])
    value = np.array([np.nan if line["feedback"]["click_value"] is None
                      else line["feedback"]["click_value"] for line in lines])
    params = {**learner_class("continuous", "cats").service_defaults, **CONFIG["params"],
              "action_range": RANGE, "rho0": RHO0, "rho1": RHO1}
    learner = build("continuous", "cats", 3, None, params, seed=0)
    assert isinstance(learner, ContinuousBandit)
    for start in range(0, train, BATCH):
        rows = slice(start, min(start + BATCH, train))
        own = learner.decide_contexts(X[rows])
        learner.learn_many({"x": own["x"], "greedy": own["greedy"], "action": prices[rows],
                            "pdf": pdf[rows], "reward": raw[rows], "click_value": value[rows]})
    rest = slice(train, None)
    clicked = ~np.isnan(value[rest])
    rewards = np.where(clicked, (raw[rest] - value[rest] * RHO0) / (1 - RHO0 - RHO1),
                       raw[rest])
    greedy = np.asarray(learner.decide_contexts(X[rest], explore=False)["greedy"])
    windows = np.column_stack(window(greedy, *RANGE, learner.half_width))
    return smoothed_evaluation(X[rest], prices[rest], pdf[rest], rewards, windows,
                               (RANGE[0], RANGE[1]))


def test_a_configuration_is_trained_on_the_log_and_scored_as_the_command_line_does(
        client: TestClient, tenant: dict[str, str], redis_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The job's values and intervals are the in-memory estimators of the configuration
    trained on the first half of the logged events (1e-9 relative), its split names the
    stream ids, its rates are flagged as given; the command line on the export with the
    model's snapshot prints the same numbers."""
    new_model(client, tenant, task="continuous", algorithm="ridge_ucb", n_features=3,
              n_classes=None, params={"action_range": RANGE, "rho0": RHO0, "rho1": RHO1,
                                      "epsilon": LOG_EPSILON})
    for seed in (6, 7):
        _priced(client, tenant, PricingWorld(), seed)
    body = client.get("/v1/models/m1/log", headers=tenant).content
    lines = [line for line in map(orjson.loads, body.splitlines()) if line["type"] == "event"]
    n = 2 * ROUNDS
    assert len(lines) == n
    served = evaluate(client, tenant, redis_url, CONFIG)

    want = _expected(lines, n // 2)
    assert served["n"] == n // 2 and served["ess"] == pytest.approx(want.ess, rel=1e-9)
    assert not served["low_ess"], served
    checked = []
    for name in ("ips", "snips", "dr"):
        assert served[name]["value"] == pytest.approx(getattr(want, name).value, rel=1e-9)
        assert served[name]["ci"] == pytest.approx(list(getattr(want, name).ci), rel=1e-9)
        checked.append(name)
    assert len(checked) == 3
    assert served["split"]["train"]["events"] == served["split"]["evaluate"]["events"] == n // 2
    assert served["split"]["evaluate"]["stream_ids"] == [lines[n // 2]["stream_id"],
                                                         lines[-1]["stream_id"]]
    assert (served["calibration_unreliable"], served["reason"]) == (True, "no_estimator")

    (tmp_path / "log.jsonl").write_bytes(body)
    logs = [tmp_path / "log.jsonl"]
    if importlib.util.find_spec("pyarrow") is not None:
        write_pages(iter([(body, None)]), tmp_path / "parquet", 0, lambda n: None)
        logs.append(tmp_path / "parquet")
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(client.get("/v1/models/m1/snapshot", headers=tenant).text)
    compared = []
    for log in logs:
        capsys.readouterr()
        code = main(["evaluate", "--no-progress", "--log", str(log), "--format", "noisyloop",
                     "--policy", f"config:{json.dumps(CONFIG)}", "--model-snapshot",
                     str(snapshot)])
        out = capsys.readouterr()
        assert code == 0, out.err
        result = orjson.loads(out.out)
        assert result["split"] == served["split"] and result["calibration_unreliable"] is True
        for name in ("ips", "snips", "dr"):
            assert result[name]["value"] == pytest.approx(served[name]["value"], rel=1e-9)
            assert result[name]["ci"] == pytest.approx(served[name]["ci"], rel=1e-9)
        compared.append(log)
    assert compared == logs


@pytest.mark.parametrize(("policy", "field"), [
    ({"algorithm": "rcnbf"}, "policy.algorithm"),  # a label learner: not of this task
    ({"algorithm": "ridge_ucb", "params": {"action_range": [0.0, 5.0]}},
     "policy.params.action_range"),
    ({"algorithm": "cats", "params": {"epsilon": 2.0}}, "policy.params.epsilon"),
    ({"algorithm": "cats", "params": {"bins": "many"}}, "policy.params.bins"),
])
def test_a_configuration_the_task_cannot_take_is_refused_naming_the_field(
        client: TestClient, tenant: dict[str, str], policy: dict[str, Any],
        field: str) -> None:
    _model(client, tenant)
    r = client.post("/v1/models/m1/evaluations", headers=tenant, json={"policy": policy})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.text


def test_the_command_refuses_a_configuration_for_another_range_naming_it(
        tmp_path: Path, client: TestClient, tenant: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    _model(client, tenant)
    _priced(client, tenant, PricingWorld(), 6)
    (tmp_path / "log.jsonl").write_bytes(client.get("/v1/models/m1/log", headers=tenant).content)
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(client.get("/v1/models/m1/snapshot", headers=tenant).text)
    capsys.readouterr()
    policy = {"algorithm": "cats", "params": {"action_range": [0, 5]}}
    assert main(["evaluate", "--no-progress", "--log", str(tmp_path / "log.jsonl"),
                 "--format", "noisyloop", "--policy", f"config:{json.dumps(policy)}",
                 "--model-snapshot", str(snapshot)]) == 2
    assert "policy.params.action_range" in capsys.readouterr().err
