"""workers.evaluations on a rank model's log: the rates its clicks are corrected by (the
request's, else the model's published per-slot estimate, else its current rates) and the
flags its result carries (:func:`workers.evaluations.ranking_rates`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.evaluation.estimators import Options
from app.evaluation.rankings import evaluate_ranking_parts, rank_policy
from app.evaluation.rates import SCALAR_REWARD, SLOT_REWARD
from app.evaluation.servicelog import log_batches, rank_log_of
from app.store import codec
from app.store.decisionlog import LogEntry
from app.store.logrecords import entry_records
from app.store.noise import NoiseRecord
from tests.evaluation.test_rankings import CHUNK, _batches, rank_log
from workers.evaluations import ranking_rates

THETA, RHO0, RHO1 = (1.0, 0.6, 0.35), (0.2, 0.12, 0.06), 0.1
#: A published per-slot estimate as ``GET .../noise`` shows it (intervals 0.04 wide).
SLOT_ESTIMATE = [{"slot": k, "theta": t, "rho0": r, "rho1": RHO1,
                  "interval": {"theta": [t, t] if k == 0 else [t - 0.02, t + 0.02],
                               "rho0": [r - 0.02, r + 0.02], "rho1": [0.08, 0.12]}}
                 for k, (t, r) in enumerate(zip(THETA, RHO0, strict=True))]


def _evaluate(entries: list[LogEntry], request: dict[str, Any], noise: NoiseRecord | None
              ) -> dict[str, Any]:
    """The service's evaluation of ``request`` on the logged ``entries`` of a model with the
    rates ``noise``: its options by :func:`ranking_rates`, the log streamed in chunks."""
    by, flags = ranking_rates(request, noise)
    options = Options(**by, n_boot=request.get("bootstrap", 200))
    records = [r for entry in entries for r in entry_records(entry)]
    result = evaluate_ranking_parts(list(log_batches(records, CHUNK, rank_log_of)), _batches,
                                    rank_policy(request["policy"]), options)
    return {**result, **flags}


@pytest.fixture(scope="module")
def logged() -> tuple[list[LogEntry], np.ndarray]:
    entries, _, _ = rank_log(0, 300)
    clicks = np.stack([codec.decode(e.feedback)["clicks"] for entry in entries
                       for e in entry.events()])
    return entries, clicks


def test_a_published_per_slot_estimate_corrects_each_slot_with_its_errors(
        logged: tuple[list[LogEntry], np.ndarray]) -> None:
    entries, clicks = logged
    noise = NoiseRecord(RHO0[0], RHO1, "estimated", slots=SLOT_ESTIMATE)
    request = {"policy": "logging", "bootstrap": 50}
    result = _evaluate(entries, request, noise)
    alpha = np.array(THETA) * (1.0 - np.array(RHO0) - RHO1)
    expected = (clicks.mean(axis=0) - np.array(THETA) * RHO0) / alpha
    assert [p["ips"]["value"] for p in result["positions"]] == pytest.approx(expected)
    assert result["slates"]["rips"]["value"] == pytest.approx(expected.sum())
    assert result["correction"]["reward"] == SLOT_REWARD
    assert result["correction"]["rate_uncertainty"]["theta_se"][1] == pytest.approx(
        0.02 / 1.959964, rel=1e-5)
    assert (result["rates"], result["calibration_unreliable"]) == ("model", False)
    assert "reason" not in result
    # the same rates taken as exact: narrower intervals at every slot below the first
    exact = [{**s, "interval": None} for s in SLOT_ESTIMATE]
    narrow = _evaluate(entries, request,
                       NoiseRecord(RHO0[0], RHO1, "estimated", slots=exact))
    for wide, tight in zip(result["positions"][1:], narrow["positions"][1:], strict=True):
        assert wide["ips"]["ci_high"] - wide["ips"]["ci_low"] > \
            tight["ips"]["ci_high"] - tight["ips"]["ci_low"]


def test_without_a_published_estimate_the_models_rates_are_used_and_flagged(
        logged: tuple[list[LogEntry], np.ndarray]) -> None:
    entries, clicks = logged
    request = {"policy": "logging", "bootstrap": 20}
    waiting = _evaluate(entries, request, NoiseRecord(0.0, 0.0, "initial"))
    assert (waiting["rates"], waiting["calibration_unreliable"], waiting["reason"]) == (
        "model", True, "noise_rates_unreliable")
    assert waiting["correction"]["reward"] == "f (no noise correction)"  # rates 0 and 0
    assert waiting["ips"]["value"] == pytest.approx(clicks[:, 0].mean())
    # a published estimate of one rho0 for every slot: its error is not in the intervals
    scalar = _evaluate(entries, request, NoiseRecord(0.1, 0.2, "estimated"))
    assert (scalar["calibration_unreliable"], scalar["reason"]) == (True, "noise_rates_estimated")
    configured = _evaluate(entries, request,
                           NoiseRecord(0.1, 0.2, "configured"))
    assert configured["calibration_unreliable"] is False
    assert configured["correction"]["reward"] == SCALAR_REWARD
    assert configured["ips"]["value"] == pytest.approx((clicks[:, 0].mean() - 0.1) / 0.7)

def test_a_requests_rates_are_every_slots_noise_under_the_estimated_examination(
        logged: tuple[list[LogEntry], np.ndarray]) -> None:
    """Scalar rates in the request are each slot's click noise in the per-slot formula,
    the examination the model's published estimate, whole or its examination alone (slot 1
    was corrected as if examined always: 0.6 of its value; with the examination alone the
    result was flagged by the model's own unpublished rates, which it does not use);
    without an estimate examination is unknown, flagged."""
    entries, clicks = logged
    request = {"policy": "logging", "bootstrap": 20, "rho0": 0.1, "rho1": 0.2}
    given = _evaluate(entries, request,
                      NoiseRecord(RHO0[0], RHO1, "estimated", slots=SLOT_ESTIMATE))
    assert (given["rates"], given["calibration_unreliable"]) == ("request", False)
    theta = np.array(THETA)
    expected = (clicks.mean(axis=0) - theta * 0.1) / (theta * 0.7)
    assert [p["ips"]["value"] for p in given["positions"]] == pytest.approx(expected)
    assert (given["correction"]["theta"], given["correction"]["rho0"]) == (
        list(THETA), [0.1] * 3)
    assert given["correction"]["rate_uncertainty"]["rho0_se"] == [0.0] * 3
    # the examination published alone (the model's own rates still awaiting an estimate):
    # the request's rates stand in for those, so nothing is flagged
    alone = [{**s, "published": {"theta": True, "rho0": False, "rho1": False}}
             for s in SLOT_ESTIMATE]
    examined = _evaluate(entries, request, NoiseRecord(0.0, 0.0, "initial", slots=alone))
    assert (examined["rates"], examined["calibration_unreliable"]) == ("request", False)
    assert [p["ips"]["value"] for p in examined["positions"]] == pytest.approx(expected)
    unknown = _evaluate(entries, request, NoiseRecord(0.0, 0.0, "initial"))
    assert (unknown["rates"], unknown["calibration_unreliable"], unknown["reason"]) == (
        "request", True, "position_bias_unknown")
    assert [p["ips"]["value"] for p in unknown["positions"]] == pytest.approx(
        (clicks.mean(axis=0) - 0.1) / 0.7)
