"""DR of a Vowpal Wabbit CATS dsjson log: the continuous task's smoothed DR with its reward
model fitted on the log's context features and actions (:mod:`app.commands.evaluate_cats`)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from app.cli import main
from app.evaluation.smoothed import smoothed_evaluation
from app.learners.smoothing import window
from tests.commands.test_evaluate_dsjson import CATS_LOG, TOLERANCE, VW_DATA

LO, HI = 185.0, 23959.0
H = (HI - LO) / 32  # the command's default bandwidth


def _read() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Contexts (one column per feature name of ``c``, in order of first sight), actions,
    densities and rewards (-cost) of the labelled, learnable lines, read here."""
    rows = [json.loads(line) for line in CATS_LOG.read_text().splitlines()
            if line.startswith("{")]
    kept = [r for r in rows if "_label_ca" in r and not r.get("_skipLearn")]
    names: dict[str, int] = {}
    for r in kept:
        for name in r["c"]:
            names.setdefault(name, len(names))
    X = np.zeros((len(kept), len(names)))
    for i, r in enumerate(kept):
        for name, value in r["c"].items():
            X[i, names[name]] = value
    label = [r["_label_ca"] for r in kept]
    return (X, np.array([k["action"] for k in label]), np.array([k["pdf_value"] for k in label]),
            -np.array([k["cost"] for k in label]))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["evaluate", "--no-progress", "--format", "dsjson", *args]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


@pytest.mark.parametrize("policy", ["uniform", "fixed:4000", "fixed:12000.5"])
def test_a_cats_logs_dr_fits_its_reward_model_on_the_contexts_and_actions(
        capsys: pytest.CaptureFixture[str], policy: str) -> None:
    """DR is the smoothed DR of the arrays read here (the reward model on the context's
    features and the action, cross-fitted by the line's place): the same sums, 1e-9; its
    interval holds its value and differs from IPS (a model was fitted)."""
    X, action, pdf, reward = _read()
    n = len(action)
    windows = (np.tile([LO, HI], (n, 1)) if policy == "uniform" else
               np.column_stack(window(np.full(n, float(policy.partition(":")[2])), LO, HI, H)))
    want = smoothed_evaluation(X, action, pdf, reward, windows, (LO, HI), seed=3)
    result = _run(capsys, "--log", str(CATS_LOG), "--policy", policy, "--action-range",
                  str(LO), str(HI), "--seed", "3")
    assert result["dr"]["value"] == pytest.approx(want.dr.value, rel=TOLERANCE)
    assert [result["dr"]["ci_low"], result["dr"]["ci_high"]] == pytest.approx(
        list(want.dr.ci), rel=TOLERANCE)
    assert result["ips"]["value"] == pytest.approx(want.ips.value, rel=TOLERANCE)
    assert result["dr"]["ci_low"] <= result["dr"]["value"] <= result["dr"]["ci_high"]
    assert result["dr"]["value"] != pytest.approx(result["ips"]["value"], rel=1e-6)
    assert result["reward_model"] == {"features": X.shape[1], "folds": 2}


def test_a_cats_logs_logging_dr_is_its_mean_reward_and_vws_own_log_has_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, _, reward = _read()
    result = _run(capsys, "--log", str(CATS_LOG), "--policy", "logging")
    assert result["dr"]["value"] == pytest.approx(reward.mean(), rel=TOLERANCE)
    own = _run(capsys, "--log", str(VW_DATA / "cats_train.json"), "--policy", "fixed:10")
    assert np.isfinite(own["dr"]["value"]) and own["low_ess"]
