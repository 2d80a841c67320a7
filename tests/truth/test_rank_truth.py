"""The rank task at default settings against a stream whose truth is known.

A rank model created with nothing but its sizes learns from the simulated
stream of :mod:`app.sim.rank` (20 candidates per request, 3 slots, position
bias theta (1, 0.6, 0.35), click noise (0.03, 0.3) that nobody gives the
model) through the real service, in batches of 200 rankings with a ``sync``
after each.  Then every number the API shows about it is checked against the
simulator's truth or must be flagged: the noise rates (nobody gave them:
``calibration_unreliable`` with reason ``rates_not_given``), the position bias
(flagged: no per-slot estimate is published without the jobs role), and the
``uniform`` and ``logging`` evaluations of its log, raw and noise-corrected, per
position; then the jobs role runs its per-slot estimate, and the evaluation by the
model's own rates must hold the relevance placed in each slot or be flagged.  The stream
runs once per module (:func:`shown`); each test checks one kind of number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
import redis

from app.evaluation.heavy_tails import MIN_ESS
from app.sim.rank import RankSimulator
from tests.api.conftest import TestClient, make_client, new_tenant, post_feedback
from tests.api.test_evaluations import evaluation
from tests.api.test_noise_service import run_nrest
from tests.truth.test_label_truth import until

#: Rankings of the module's stream (:func:`shown`): the evaluations' intervals and the
#: effective sample sizes they are checked against scale with it.
ROUNDS, BATCH, SEED = 10_000, 200, 0
#: The widest interval the per-slot estimate may be published with before the evaluation by
#: the model's own rates (:func:`test_an_evaluation_by_the_models_own_rates_holds_or_is_flagged`).
OWN_WIDTH = 0.3
#: Standard errors to either side of a two-sided 95% normal interval.
Z95 = NormalDist().inv_cdf(0.975)

pytestmark = pytest.mark.slow


def run_stream(client: TestClient, tenant: dict[str, str],
               sim: RankSimulator | None = None, rounds: int = ROUNDS,
               batch: int = BATCH,
               after_batch: Callable[[int], object] | None = None,
               create: bool = True) -> dict[str, Any]:
    """Create a seeded rank model ``m1`` (default parameters; ``create`` false: it exists)
    and feed it the simulated stream (``sim``, default :class:`RankSimulator` with
    :data:`SEED`) for ``rounds`` rankings in batches of ``batch`` (``after_batch``: called
    with the rankings fed so far after each batch's ``sync``); per ranking, the mean
    relevance of its candidates, the relevance and the observed click of each slot."""
    sim = sim or RankSimulator(seed=SEED)
    body = {"model_id": "m1", "task": "rank", "n_features": sim.n_features,
            "n_action_features": sim.n_action_features, "slots": sim.slots, "seed": SEED,
            "params": {}}
    if create:
        assert client.post("/v1/models", json=body, headers=tenant).status_code == 201
    mean_relevance, relevance, clicks = [], [], []
    for done in range(batch, rounds + 1, batch):
        requests = [sim.request() for _ in range(batch)]
        r = client.post("/v1/models/m1/rank", headers=tenant, json={"requests": [
            {"features": q.x.tolist(),
             "actions": [{"id": str(i), "features": a.tolist()}
                         for i, a in zip(q.ids, q.actions, strict=True)]}
            for q in requests]})
        assert r.status_code == 200, r.text
        events = []
        for q, result in zip(requests, r.json()["results"], strict=True):
            row = {str(i): k for k, i in enumerate(q.ids)}
            ranking = np.array([row[x["id"]] for x in result["ranking"]])
            clicked = sim.clicks(q, ranking)
            mean_relevance.append(float(q.relevance.mean()))
            relevance.append(q.relevance[ranking])
            clicks.append(clicked)
            events.append({"event_id": result["event_id"],
                           "clicks": [x["id"] for x, c in zip(result["ranking"], clicked,
                                                               strict=True) if c]})
        assert post_feedback(client, tenant, {"events": events}).status_code == 202
        # a loaded machine can take longer than the default 10 s to apply a batch
        assert client.post("/v1/models/m1/sync?timeout=120",
                           headers=tenant).status_code == 200
        if after_batch is not None:
            after_batch(done)
    return {"sim": sim, "mean_relevance": np.array(mean_relevance),
            "relevance": np.array(relevance), "clicks": np.array(clicks)}


@pytest.fixture(scope="module")
def shown(redis_server: Any) -> Iterator[dict[str, Any]]:
    """The stream's truth and what the service showed about it: the model, its noise, and
    the ``uniform`` and ``logging`` evaluations of its log, raw (rates 0 and 0 given: else
    the model's own would correct them) and with the true rates."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with make_client(redis_server.url) as client:
        tenant = new_tenant(client)
        out = run_stream(client, tenant)
        sim = out["sim"]
        # the newest point trails the model by at most one series interval (10 s) and a pass
        out["points"] = until(
            lambda: client.get("/v1/models/m1/series", headers=tenant).json()["points"],
            lambda p: bool(p) and p[-1]["events_applied"] == ROUNDS, 30.0)
        out["model"] = client.get("/v1/models/m1", headers=tenant).json()
        out["noise"] = client.get("/v1/models/m1/noise", headers=tenant).json()
        out["evaluations"] = {
            (policy, corrected): evaluation(client, tenant, redis_server.url,
                                            {"policy": policy, "rho0": rho0, "rho1": rho1})
            for policy in ("uniform", "logging")
            for corrected, rho0, rho1 in ((False, 0.0, 0.0), (True, sim.rho0, sim.rho1))}
        # without rates: the model's own, after the jobs role ran the per-slot estimate with
        # a wider max_width than the default's (at 10,000 rankings none is 0.1 wide)
        assert client.put("/v1/models/m1/noise", json={"max_width": OWN_WIDTH},
                          headers=tenant).status_code == 200
        run_nrest(redis_server.url)
        out["own_noise"] = client.get("/v1/models/m1/noise", headers=tenant).json()
        out["own_rates"] = evaluation(client, tenant, redis_server.url, {"policy": "logging"})
    yield out


def test_noise_rates_nobody_gave_are_flagged(shown: dict[str, Any]) -> None:
    noise, stats = shown["noise"], shown["model"]["stats"]
    assert (noise["rho0"], noise["rho1"], noise["source"]) == (0.0, 0.0, "initial")
    # the per-slot estimate runs in the jobs role, which this stream does not start
    assert (noise["estimator"], noise["status"], noise["reason"], noise["interval"]) == (
        "anchor", "insufficient_data", "too_few_events", None)
    assert stats["calibration_unreliable"] is True


def test_position_bias_is_flagged_until_a_per_slot_estimate_is_published(
        shown: dict[str, Any]) -> None:
    # the position bias shown is the per-slot estimate's (tests/truth/test_trust_truth.py
    # checks it against the truth); the jobs role that publishes it does not run here
    assert shown["model"]["position_bias"] == {
        "values": [1.0] * shown["sim"].slots, "source": "insufficient_data",
        "calibration_unreliable": True}


def test_series_rewards_are_slot_0s_clicks_flagged_without_rates(
        shown: dict[str, Any]) -> None:
    """Each series point's ``online_reward`` is the mean slot-0 click of its window's
    rankings (applied in the order sent: one client, batch after batch), ``debiased_reward``
    that of every ranking so far; both corrected by the rates in force, the initial 0 and
    0, so ``calibrated_reward`` is ``online_reward`` and every point says ``noise_source``
    ``initial`` (flagged: no rates nobody gave are applied) and ``position_bias_source``
    ``insufficient_data``."""
    clicks = shown["clicks"][:, 0]
    points = shown["points"]
    assert points[-1]["events_applied"] == ROUNDS, points[-1]
    checked = 0
    for before, point in zip([{"events_applied": 0}, *points[:-1]], points, strict=True):
        start, end = before["events_applied"], point["events_applied"]
        if start == end:
            continue
        checked += 1
        assert point["online_reward"] == pytest.approx(clicks[start:end].mean(), abs=1e-6)
        assert point["calibrated_reward"] == pytest.approx(point["online_reward"], abs=1e-6)
        assert point["debiased_reward"] == pytest.approx(clicks[:end].mean(), abs=1e-6)
        assert (point["noise_source"], point["rho0_interval"]) == ("initial", None), point
        assert point["position_bias_source"] == "insufficient_data", point
    assert checked >= 1, points


def true_values(shown: dict[str, Any], policy: str) -> np.ndarray:
    """Per slot, the true click probability under ``policy``: theta_k times the mean
    relevance of the candidates (uniform: every slot holds a uniformly drawn candidate), or
    of the items the log showed there (logging)."""
    theta = shown["sim"].theta
    if policy == "uniform":
        values: np.ndarray = shown["mean_relevance"].mean() * theta
        return values
    return (shown["relevance"] * theta).mean(axis=0)  # type: ignore[no-any-return]


def missed(shown: dict[str, Any], policy: str, positions: slice) -> list[Any]:
    """The evaluations of ``policy`` whose 95% interval misses the truth, at ``positions``:
    ``V`` with the true rates given, ``rho0 + (1 - rho0 - rho1) V`` with rates 0 and 0.
    The request's rates are every slot's click noise; ``V`` is the relevance placed in each
    slot when the per-slot estimate's examination is published (the evaluation divides
    ``theta_k`` out, its error in the intervals), else ``theta_k`` times it, flagged
    ``position_bias_unknown``.  Which of the two depends on whether the jobs role that runs
    the evaluations has published the examination by then; each is checked when it runs.
    Divided by an examination whose own 95% interval misses this stream's
    (:func:`examination_missed`), a slot's intervals carry that estimate's miss, not the
    evaluation's: such a slot is not checked (slot 0's examination is 1 exactly, always
    checked).  The per-slot estimate's intervals are checked by their coverage over 40
    seeds (``test_estimators_truth.py::test_the_per_slot_estimate_covers_every_slots_rates``):
    each slot's misses on about one stream in 20.  Without this, the verdict at slot 2
    turned on which stream the service drew (decisions are seeded by the snapshot version,
    so a batch learned in one publish rather than two draws another stream): on one, whose
    clicks were logged exactly, slot 2's examination read 0.285-0.374 for 0.378."""
    sim = shown["sim"]
    beta = 1.0 - sim.rho0 - sim.rho1
    out = []
    checked = 0
    for corrected in (False, True):
        done = shown["evaluations"][policy, corrected]
        assert done["status"] == "done" and done["n"] == ROUNDS, done
        flags = (done["rates"], done["calibration_unreliable"], done.get("reason"))
        value = true_values(shown, policy)
        unchecked: set[int] = set()
        if "theta" in (done.get("correction") or {}):
            assert flags == ("request", False, None), done
            value = value / sim.theta
            unchecked = examination_missed(done["correction"], sim)
        else:
            assert flags == ("request", True, "position_bias_unknown"), done
        target = value if corrected else sim.rho0 + beta * value
        for position in done["positions"][positions]:
            k = position["position"]
            if k in unchecked:
                continue
            checked += 1
            out += [(corrected, k, name, target[k], position[name])
                    for name in ("ips", "snips", "dr")
                    if not position[name]["ci_low"] <= target[k] <= position[name]["ci_high"]]
    assert checked >= 1, (policy, positions)
    return out


def examination_missed(correction: dict[str, Any], sim: RankSimulator) -> set[int]:
    """The slots whose examination ``theta_k`` in an evaluation's ``correction`` (the
    model's per-slot estimate) is farther from the one this stream's clicks follow
    (:meth:`~app.sim.rank.RankSimulator.slot_noise`: ``(rho0 + beta theta_k) / (1 - rho1)``)
    than its 95% interval reaches (:data:`Z95` standard errors)."""
    theta = correction["theta"]
    se = correction.get("rate_uncertainty", {}).get("theta_se", [0.0] * len(theta))
    true = sim.slot_noise()[0]
    return {k for k, (t, s, truth) in enumerate(zip(theta, se, true, strict=True))
            if abs(t - truth) > Z95 * s}


def test_logging_evaluation_holds_the_truth_at_every_slot(shown: dict[str, Any]) -> None:
    assert missed(shown, "logging", slice(None)) == []


def test_uniform_evaluation_holds_the_truth_in_slot_0(shown: dict[str, Any]) -> None:
    assert missed(shown, "uniform", slice(0, 1)) == []


def test_uniform_evaluation_holds_the_truth_below_slot_0(shown: dict[str, Any]) -> None:
    """Below slot 0 a uniform ranking's cascade weights rest on a few events (an effective
    sample size of tens of the 10,000 rankings): such slots are flagged
    ``insufficient_data`` and their intervals widened to the betting bound, which holds the
    truth (the bootstrap's alone missed it at slot 1: 0.07-0.14 for 0.175 raw)."""
    for done in (shown["evaluations"]["uniform", c] for c in (False, True)):
        for position in done["positions"][1:]:
            assert position.get("insufficient_data", False) == (position["ess"] < MIN_ESS)
    assert missed(shown, "uniform", slice(1, None)) == []


def test_an_evaluation_by_the_models_own_rates_holds_or_is_flagged(
        shown: dict[str, Any]) -> None:
    """Without rates a rank log is corrected by the model's published per-slot estimate,
    whose errors the intervals carry: then every slot's SNIPS interval holds the relevance
    the log placed there.  This stream's graded relevance breaks the estimate's assumption
    (each anchor band of one relevance): in the runs here it refused (``anchor_not_flat``,
    or ``interval_too_wide`` when that was not yet significant) rather than publish biased
    rates (its rho1 had read 0.32 for 0.3); then the evaluation corrects nothing and is
    flagged.  Either branch checks: the one that holds values also runs on the binary trust
    stream (``test_trust_truth.py``) and over 40 seeds in process
    (``test_estimators_truth.py::test_each_slot_is_corrected_by_its_own_rates``)."""
    noise, done = shown["own_noise"], shown["own_rates"]
    assert done["status"] == "done" and done["n"] == ROUNDS and done["rates"] == "model", done
    if noise["status"] != "published":
        assert noise["reason"] in ("anchor_not_flat", "interval_too_wide"), noise
        assert (done["calibration_unreliable"], done["reason"]) == (
            True, "noise_rates_unreliable"), done
        assert done["correction"]["reward"] == "f (no noise correction)", done
        return
    assert done["calibration_unreliable"] is False, done
    assert done["correction"]["theta"] == [s["theta"] for s in noise["slots"]]
    placed = shown["relevance"].mean(axis=0)
    missed = [(p["position"], p["snips"], value)
              for p, value in zip(done["positions"], placed, strict=True)
              if not p["snips"]["ci_low"] <= value <= p["snips"]["ci_high"]]
    assert missed == [], missed
