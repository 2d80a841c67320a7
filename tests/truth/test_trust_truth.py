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
true relevance placed in each slot, and rates put by hand replace the estimate.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import redis

from app.sim.trust import RHO1, THETA, TRUST_RHO0, trust_simulator
from tests.api.conftest import make_client, new_tenant
from tests.api.test_evaluations import evaluation
from tests.api.test_noise_service import run_nrest
from tests.truth.test_rank_truth import run_stream

pytestmark = pytest.mark.slow

ROUNDS, BATCH, WIDTH = 6_000, 500, 0.25


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


def test_slots_published_by_the_service_and_used_everywhere(redis_server: Any) -> None:
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with make_client(redis_server.url) as client:
        tenant = new_tenant(client)
        out = run_stream(client, tenant, sim=trust_simulator(0), rounds=ROUNDS, batch=BATCH)
        before = client.get("/v1/models/m1/noise", headers=tenant).json()
        stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
        assert client.put("/v1/models/m1/noise", json={"max_width": WIDTH},
                          headers=tenant).status_code == 200
        run_nrest(redis_server.url)
        noise = client.get("/v1/models/m1/noise", headers=tenant).json()
        model = client.get("/v1/models/m1", headers=tenant).json()
        evaluated = evaluation(client, tenant, redis_server.url,
                               {"policy": "logging", "bootstrap": 100})
        put = client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2},
                         headers=tenant).json()
        fixed = client.get("/v1/models/m1", headers=tenant).json()
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
