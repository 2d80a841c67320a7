"""Per-slot examination and click noise through the service, on a trust-bias stream.

A rank model created with nothing but its sizes (the ``anchor`` estimator, for rank
models the per-slot one) learns 6,000 rankings of :func:`app.sim.trust.trust_simulator`
(binary relevance decided by the features, examination (1, 0.6, 0.35), ``rho0_k``
(0.2, 0.12, 0.06), ``rho1`` 0.1) through the real service, and the jobs role runs.  The
stream is short to keep the test lean (the accuracy at 30,000 requests is
``tests/learners/test_noise_slots.py``'s and ``bench/bench_noise_slots.py``'s), so the
model is allowed intervals up to 0.25 wide (``PUT .../noise``): then ``GET .../noise``
publishes every slot, the six estimated numbers together within their 95% intervals
widened to a joint 95% (:data:`JOINT_Z`; their coverage over seeds is
``test_estimators_truth.py``'s),
``position_bias`` is the same estimate, ``debiased_reward`` is within 0.03 of the true
relevance of the items ranked first, the evaluation of the log's logging policy holds the
true relevance placed in each slot, and rates put by hand replace the estimate.  Then
:data:`AFTER` more rankings are learned at the published rates and each series point of
theirs holds the truth (:func:`test_series_rewards_hold_slot_0s_relevance_at_published_rates`).
"""

from __future__ import annotations

import itertools
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import redis

from app.sim.trust import RHO1, THETA, TRUST_RHO0, trust_simulator
from tests.api.conftest import TestClient, make_client, new_tenant
from tests.api.test_evaluations import evaluation
from tests.api.test_noise_service import run_nrest
from tests.truth.test_label_truth import until
from tests.truth.test_rank_truth import run_stream

pytestmark = pytest.mark.slow

ROUNDS, BATCH, WIDTH = 6_000, 500, 0.25
#: Rankings learned after the estimate is published (the series points checked).
AFTER = 2_000


#: The six estimated numbers (``theta_1``, ``theta_2``, the three ``rho0_k``, ``rho1``) hold
#: together with probability 0.95 when each 95% interval is widened to ``z = Phi^-1(1 -
#: 0.05 / 12) = 2.64`` standard errors (Bonferroni): the one-seed tolerance of this stream.
JOINT_Z = NormalDist().inv_cdf(1 - 0.05 / 12)


def _within(slot: dict[str, Any], name: str, truth: float) -> bool:
    """Whether ``truth`` is within :data:`JOINT_Z` standard errors of the slot's estimate
    ``name`` (the wider side of its 95% interval, which is clipped to [0, 1], over 1.96)."""
    value, (low, high) = slot[name], slot["interval"][name]
    half = max(high - value, value - low)
    return abs(truth - value) <= half * JOINT_Z / NormalDist().inv_cdf(0.975)


@pytest.fixture(scope="module")
def shown(redis_server: Any) -> dict[str, Any]:
    """The stream's truth and what the service showed, before and after the estimate was
    published (module docstring)."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with make_client(redis_server.url) as client:
        tenant = new_tenant(client)
        sim = trust_simulator(0)
        out = run_stream(client, tenant, sim=sim, rounds=ROUNDS, batch=BATCH)
        out["before"] = client.get("/v1/models/m1/noise", headers=tenant).json()
        out["stats"] = client.get("/v1/models/m1", headers=tenant).json()["stats"]
        assert client.put("/v1/models/m1/noise", json={"max_width": WIDTH},
                          headers=tenant).status_code == 200
        run_nrest(redis_server.url)
        out["noise"] = client.get("/v1/models/m1/noise", headers=tenant).json()
        out["model"] = client.get("/v1/models/m1", headers=tenant).json()
        out["evaluated"] = evaluation(client, tenant, redis_server.url,
                                      {"policy": "logging", "bootstrap": 100})
        out["after"] = run_stream(client, tenant, sim=sim, rounds=AFTER, batch=BATCH,
                                  create=False)
        out["points"] = _points(client, tenant)
        out["put"] = client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2},
                                headers=tenant).json()
        out["fixed"] = client.get("/v1/models/m1", headers=tenant).json()
    return out


def _points(client: TestClient, tenant: dict[str, str]) -> list[dict[str, Any]]:
    """The series points once the newest holds every ranking learned (it trails the model
    by at most one series interval and a trainer pass)."""
    return until(  # type: ignore[no-any-return]
        lambda: client.get("/v1/models/m1/series", headers=tenant).json()["points"],
        lambda p: bool(p) and p[-1]["events_applied"] == ROUNDS + AFTER, 30.0)


def test_slots_published_by_the_service_and_used_everywhere(shown: dict[str, Any]) -> None:
    out, before, stats, noise, model, evaluated, put, fixed = (
        shown, shown["before"], shown["stats"], shown["noise"], shown["model"],
        shown["evaluated"], shown["put"], shown["fixed"])
    assert (before["estimator"], before["status"], before["slots"]) == (
        "anchor", "insufficient_data", None)
    assert stats["calibration_unreliable"] is True
    assert (noise["status"], noise["source"]) == ("published", "estimated"), noise["reason"]
    slots = noise["slots"]
    assert [s["slot"] for s in slots] == [0, 1, 2]
    for s, theta, rho0 in zip(slots, THETA, TRUST_RHO0, strict=True):
        assert _within(s, "theta", theta), slots
        assert _within(s, "rho0", rho0), slots
        assert _within(s, "rho1", RHO1), slots
    assert (noise["rho0"], noise["rho1"]) == (slots[0]["rho0"], slots[0]["rho1"])
    assert model["position_bias"]["values"] == [s["theta"] for s in slots]
    first = float(np.mean(out["relevance"][:, 0]))
    assert model["stats"]["calibration_unreliable"] is False
    assert abs(model["stats"]["debiased_reward"] - first) <= 0.03, (
        model["stats"]["debiased_reward"], first)
    # the log's evaluation corrects each slot by the estimate: the relevance it placed there
    assert (evaluated["rates"], evaluated["calibration_unreliable"]) == ("model", False)
    assert evaluated["correction"]["theta"] == [s["theta"] for s in slots]
    for position, placed in zip(evaluated["positions"], out["relevance"].mean(axis=0),
                                strict=True):
        assert position["snips"]["ci_low"] <= placed <= position["snips"]["ci_high"], (
            position, placed)
    assert (put["source"], put["status"], put["slots"]) == ("configured", "fixed", None)
    assert fixed["position_bias"]["values"] != model["position_bias"]["values"]


def test_series_rewards_hold_slot_0s_relevance_at_published_rates(
        shown: dict[str, Any]) -> None:
    """Each series point of the rankings learned after the estimate was published shows the
    published rates (slot 0's, ``noise_source`` ``estimated``, unflagged), its
    ``online_reward`` is its window's mean slot-0 click and its ``calibrated_reward`` is
    ``h(f) = (f - rho0) / (1 - rho0 - rho1)`` of it clipped to [0, 1]: the window's mean
    true relevance in slot 0 (examined: ``theta_0 = 1``), within its one-seed tolerance
    (:func:`h_tolerance`, ``z`` for all the points together at 99%, Bonferroni); and over
    all the windows (the trainer's batches of 50 events are small), ``h`` of their mean
    click holds their mean relevance within the same tolerance at 99.9%."""
    noise, points, after = shown["noise"], shown["points"], shown["after"]
    slot0 = noise["slots"][0]
    rates = slot0["rho0"], slot0["rho1"]
    windows = [(before["events_applied"] - ROUNDS, point["events_applied"] - ROUNDS, point)
               for before, point in itertools.pairwise(points)
               if point["events_applied"] > before["events_applied"] >= ROUNDS]
    assert len(windows) >= 2, points  # the check runs
    z = NormalDist().inv_cdf(1 - 0.01 / (2 * len(windows)))
    missed = []
    for start, end, point in windows:
        clicks = after["clicks"][start:end, 0]
        assert (point["noise_source"], point["rho0"], point["rho1"], point["reason"]) == (
            "estimated", round(rates[0], 6), round(rates[1], 6), None), point
        assert point["online_reward"] == pytest.approx(clicks.mean(), abs=1e-6)
        assert point["calibrated_reward"] == pytest.approx(
            min(max((clicks.mean() - rates[0]) / (1.0 - sum(rates)), 0.0), 1.0), abs=1e-5)
        truth = float(after["relevance"][start:end, 0].mean())
        tolerance = z * h_tolerance(after["relevance"][start:end, 0], clicks, slot0)
        if abs(point["calibrated_reward"] - truth) > tolerance:
            missed.append((start, end, point["calibrated_reward"], truth, tolerance))
    assert missed == [], missed
    start, end = windows[0][0], windows[-1][1]
    clicks = after["clicks"][start:end, 0]
    pooled = (clicks.mean() - rates[0]) / (1.0 - sum(rates))
    truth = float(after["relevance"][start:end, 0].mean())
    tolerance = NormalDist().inv_cdf(0.9995) * h_tolerance(after["relevance"][start:end, 0],
                                                           clicks, slot0)
    assert abs(pooled - truth) <= tolerance, (pooled, truth, tolerance, len(clicks))


def h_tolerance(relevance: np.ndarray, clicks: np.ndarray, slot0: dict[str, Any]) -> float:
    """One standard error of ``h`` of the mean slot-0 click of rankings whose slot-0 items
    have true ``relevance``: the clicks' sampling error over ``1 - rho0 - rho1`` (true click
    probabilities ``p_i = rho0_0 + (1 - rho0_0 - rho1) R_i``) plus the published rates'
    errors carried through ``h`` (each standard error its 95% interval's half width over
    1.96), added linearly."""
    rho0, rho1 = slot0["rho0"], slot0["rho1"]
    beta = 1.0 - rho0 - rho1
    se0, se1 = ((high - low) / 2 / NormalDist().inv_cdf(0.975)
                for low, high in (slot0["interval"]["rho0"], slot0["interval"]["rho1"]))
    p = TRUST_RHO0[0] + (1.0 - TRUST_RHO0[0] - RHO1) * relevance
    f = float(clicks.mean())
    sampling = float(np.sqrt(np.sum(p * (1 - p)))) / (len(p) * beta)
    return sampling + (abs(f - 1.0 + rho1) * se0 + abs(f - rho0) * se1) / beta**2
