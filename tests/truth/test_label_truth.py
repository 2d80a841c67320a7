"""The label task at default settings against a stream whose truth is known.

A model created with nothing but its sizes (the default learner, the default
``anchor`` estimator) learns from a simulated stream through the real
service: 10 arms, 20 features, the right arm ``argmax W x``, clicks flipped at
rates (0.15, 0.25), batches of 500 events with a ``sync`` after each and the
jobs role run between batches.  After every batch every noise number the API
shows is checked against the truth: inside its stated interval, or flagged
(``insufficient_data``, ``calibration_unreliable``); so is each decision's
``expected_reward`` once the rates are published, and at the end the
evaluations of the model's log (``uniform``, ``logging``, ``fixed:N``,
``model``), raw and noise-corrected.  The default model's stream runs once per module
(:func:`default`): the tests that check it each check one kind of number.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
import redis

from tests.api.conftest import TestClient, make_client, new_tenant, predict_all
from tests.api.test_evaluations import evaluation
from tests.api.test_noise_service import answer_with_noisy_clicks

K, D, N, BATCH, RATES, SEED = 10, 20, 15_000, 500, (0.15, 0.25), 11
#: Normal quantile of the sampling tolerance on a mean click (two-sided 99.7%).
Z = 3.0
BETA = 1.0 - RATES[0] - RATES[1]

pytestmark = pytest.mark.slow

#: Why one seed is checked against a wider interval.  A fixed seed's 95% interval misses
#: for 1 seed in 20 by design, and a stream's later estimates reuse most of the plays of its
#: earlier ones, so one high draw shows in all of them (this stream's top plays, 99.8%
#: right, once clicked 0.80 for 0.75: 2.45 standard errors high).  The 95% coverage is
#: checked over seeds 0-19 through the service instead (18 of 20 for rho0, rho1 and the
#: champion's value, the other 2 flagged: ``bench/service_label_noise.py``,
#: ``bench/results/label_noise_service.json``).  So this one
#: seed is checked against the 99.9% interval: each side of the stated 95% interval scaled
#: by 3.29 / 1.96, which a right estimate misses with probability 0.001 per number (at most
#: 0.004 over the four numbers checked here); a bias of the size the mutants plant (rates
#: swapped, correction dropped: 5 or more standard errors) still falls outside it.
ONE_SEED_SCALE = 3.29 / 1.96


def one_seed_interval(point: float, low: float, high: float) -> tuple[float, float]:
    """The 99.9% interval of one seed from a stated 95% one: each side scaled by
    :data:`ONE_SEED_SCALE` around the point estimate."""
    return (point - (point - low) * ONE_SEED_SCALE, point + (high - point) * ONE_SEED_SCALE)


def rate_error(f: float, interval: dict[str, Any]) -> float:
    """First-order error of ``g = (f - rho0) / (1 - rho0 - rho1)`` when the rates may lie
    anywhere in their published intervals (their worst corner)."""
    r0, r1 = RATES
    hw0 = (interval["rho0"][1] - interval["rho0"][0]) / 2
    hw1 = (interval["rho1"][1] - interval["rho1"][0]) / 2
    return (abs(f - 1 + r1) * hw0 + abs(f - r0) * hw1) / BETA**2


def debiased_tolerance(clicks: list[int], interval: dict[str, Any]) -> float:
    """How far ``debiased_reward`` may be from the true click rate of the played arms:
    the sampling error of the mean click, plus the published intervals carried through
    ``g`` (:func:`rate_error`)."""
    n, f = len(clicks), float(np.mean(clicks))
    return Z * math.sqrt(f * (1 - f) / n) / BETA + rate_error(f, interval)


@dataclass
class Batch:
    """What the API showed after one batch, and the truth behind it."""

    preds: list[dict[str, Any]]
    hits: list[int]
    clicks: list[int]
    noise: dict[str, Any]
    stats: dict[str, Any]


@dataclass
class Stream:
    """The simulated stream as the service saw it."""

    W: np.ndarray
    X: list[np.ndarray] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)


def run_stream(client: TestClient, tenant: dict[str, str], redis_url: str,
               params: Mapping[str, Any] = MappingProxyType({}),
               challengers: Sequence[Mapping[str, Any]] = ()) -> Stream:
    """Create a seeded label model (default learner and parameters, but for ``params``;
    one right label per input stated) with ``challengers`` and feed it the simulated stream,
    batch by batch."""
    rng = np.random.default_rng(SEED)
    out = Stream(W=rng.standard_normal((K, D)))
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": D,
                                        "n_classes": K, "seed": SEED, "params": dict(params)},
                    headers=tenant)
    assert r.status_code == 201, r.text
    # one right label per input (argmax W x), as the stream's owner states
    r = client.put("/v1/models/m1/noise", json={"one_right_label": True}, headers=tenant)
    assert r.status_code == 200, r.text
    for challenger in challengers:
        r = client.post("/v1/models/m1/challengers", json=dict(challenger), headers=tenant)
        assert r.status_code == 201, r.text
    for _ in range(N // BATCH):
        X = rng.standard_normal((BATCH, D))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        preds, hits, clicks = answer_with_noisy_clicks(client, tenant, redis_url, X, out.W,
                                                       RATES, rng)
        out.X.append(X)
        out.batches.append(Batch(
            preds, hits, clicks, client.get("/v1/models/m1/noise", headers=tenant).json(),
            client.get("/v1/models/m1", headers=tenant).json()["stats"]))
    return out


@dataclass
class Shown:
    """The default model's stream and what the service showed about it at the end: its
    greedy labels for every input of the stream, and the evaluations of its log per
    (policy, rates given: a key of :data:`RATES_GIVEN`)."""

    stream: Stream
    greedy: np.ndarray
    evaluations: dict[tuple[str, str], dict[str, Any]]
    points: list[dict[str, Any]]
    """``GET .../series`` once its newest point has every event."""
    challengers: dict[str, Any]
    """``GET .../challengers`` (the :data:`UNIFORM` challenger) once it followed every
    event."""


#: The policies whose evaluations of the log are checked against their true values.
POLICIES = ("uniform", "fixed:0", "logging", "model")
#: The rates each evaluation is asked with: none (the raw clicks), the true ones, or none
#: given (the model's own, with the errors of its published estimate).
RATES_GIVEN: dict[str, dict[str, float]] = {
    "raw": {"rho0": 0.0, "rho1": 0.0}, "true": {"rho0": RATES[0], "rho1": RATES[1]},
    "model": {}}


@pytest.fixture(scope="module")
def default(redis_server: Any) -> Iterator[Shown]:
    """The stream to a default model with a :data:`UNIFORM` challenger (which follows
    without serving), run once for the tests that check what it showed."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with make_client(redis_server.url) as client:
        tenant = new_tenant(client)
        stream = run_stream(client, tenant, redis_server.url, challengers=[UNIFORM])
        # the newest point trails the model by at most one series interval (10 s) and a pass
        points = until(
            lambda: client.get("/v1/models/m1/series", headers=tenant).json()["points"],
            lambda p: bool(p) and p[-1]["events_applied"] == N, 30.0)
        body = until(lambda: client.get("/v1/models/m1/challengers", headers=tenant).json(),
                     lambda b: all(c["events"] == N for c in b["challengers"]), 30.0)
        greedy = np.array([p["label"] for p in predict_all(client, tenant, np.vstack(stream.X),
                                                           explore=False)])
        evaluations = {
            (policy, by): evaluation(client, tenant, redis_server.url, {"policy": policy, **rates})
            for policy in POLICIES for by, rates in RATES_GIVEN.items()}
    yield Shown(stream, greedy, evaluations, points, body)


def published(stream: Stream) -> list[dict[str, Any]]:
    """The noise shown after each batch whose estimate was published."""
    return [b.noise for b in stream.batches if b.noise["status"] == "published"]


def test_every_noise_number_is_estimated_or_flagged(default: Shown) -> None:
    """Before an estimate is published no estimated number is shown anywhere (the initial
    rates, flagged everywhere), nor after it is withdrawn (its rates flagged everywhere);
    once published, the estimate within ``max_width``, unflagged,
    and ``debiased_reward`` the rate of right plays so far within the sampling error of the
    mean click plus the published intervals carried through ``g``
    (:func:`debiased_tolerance`); the estimate refreshed at least once."""
    stream = default.stream
    right: list[int] = []
    clicks: list[int] = []
    estimates = set()
    withdrawn_before = False  # when the batch's decisions were made (before its refresh)
    for b in stream.batches:
        noise, stats = b.noise, b.stats
        flagged = {bool(p["calibration_unreliable"]) for p in b.preds}
        right += b.hits
        clicks += b.clicks
        if noise["status"] == "insufficient_data" and noise.get("withdrawn"):
            # an estimate a later refresh refused for its assumptions: its rates stay in
            # use, flagged everywhere; the decisions of the batch whose refresh withdrew it
            # were made before, under the estimate then published
            assert noise["source"] == "estimated" and noise["calibration_unreliable"], noise
            assert stats["calibration_unreliable"] is True
            if withdrawn_before:
                assert flagged == {True}
            withdrawn_before = True
            continue
        withdrawn_before = False
        if noise["status"] == "insufficient_data":
            # no estimated number anywhere: the initial rates, flagged everywhere
            assert (noise["source"], noise["rho0"], noise["rho1"]) == ("initial", 0.0, 0.0)
            assert noise["reason"] and noise["history"] == []
            assert noise["interval"] is None or noise["interval"]["rho0"] is None
            assert stats["calibration_unreliable"] is True
            assert flagged == {True}
            continue
        assert (noise["status"], noise["source"]) == ("published", "estimated"), noise
        interval = noise["interval"]
        for rate in ("rho0", "rho1"):
            low, high = interval[rate]
            assert high - low <= noise["max_width"]
            estimates.add((low, high))
        assert stats["calibration_unreliable"] is False
        assert abs(stats["debiased_reward"] - np.mean(right)) <= debiased_tolerance(
            clicks, interval), (stats["debiased_reward"], np.mean(right))
    assert len(published(stream)) >= 2 and len(estimates) >= 2, "never refreshed"


def test_the_published_rates_hold_the_truth_in_their_95_intervals(default: Shown) -> None:
    """Each published estimate's 95% intervals hold the true rates.  The estimates are
    cumulative (each refresh reads the newest plays, mostly those of the one before), so
    the batches of one stream are nearly one draw: the stream must be a draw whose
    intervals hold (a 95% interval of one fixed seed; its coverage over seeds through
    the service is the acceptance of the label estimator's own tests), checked at the
    one-seed tolerance of :data:`ONE_SEED_SCALE`."""
    shown = published(default.stream)
    assert shown, "nothing published"
    missed = [(rate, noise[rate], noise["interval"][rate]) for noise in shown
              for rate, truth in zip(("rho0", "rho1"), RATES, strict=True)
              if not (one_seed_interval(noise[rate], *noise["interval"][rate])[0] <= truth
                      <= one_seed_interval(noise[rate], *noise["interval"][rate])[1])]
    assert missed == [], missed


def test_the_noise_history_is_the_published_estimates(default: Shown) -> None:
    """``history`` lists the estimates published so far, oldest first: the rates shown
    after each batch, in order (each checked against the truth by its interval above),
    each with the plays it read (more as the buffer fills, never more than the stream's)."""
    shown: list[tuple[float, float]] = []
    for noise in published(default.stream):
        if not shown or shown[-1] != (noise["rho0"], noise["rho1"]):
            shown.append((noise["rho0"], noise["rho1"]))
    history = default.stream.batches[-1].noise["history"]
    assert [(h["rho0"], h["rho1"]) for h in history] == shown[-len(history):], (history, shown)
    plays = [h["n_samples"] for h in history]
    assert plays == sorted(plays) and plays[0] > 0 and plays[-1] <= N, plays


def check_expected_reward(stream: Stream) -> None:
    """Per batch, the mean ``expected_reward`` of the decisions made after the rates were
    published is the rate of right plays: within the sampling error of that rate plus the
    published intervals carried through ``h`` (a calibrated prediction's mean is the mean
    of what it predicts), or every decision says ``calibration_unreliable``."""
    checked = 0
    interval = None
    for b in stream.batches:
        # the decisions of a batch were made with the rates published before it
        if interval is not None and not all(p["calibration_unreliable"] for p in b.preds):
            n, hit = len(b.hits), float(np.mean(b.hits))
            mean = float(np.mean([p["expected_reward"] for p in b.preds]))
            tolerance = Z * math.sqrt(hit * (1 - hit) / n) + rate_error(
                RATES[0] + BETA * mean, interval)
            assert abs(mean - hit) <= tolerance, (mean, hit, tolerance)
            checked += 1
        interval = b.noise["interval"] if b.noise["status"] == "published" else None
    assert checked >= 2, "expected_reward was never checked"


def test_expected_reward_is_the_played_labels_true_click_rate_or_flagged(
        default: Shown) -> None:
    check_expected_reward(default.stream)


def test_expected_reward_without_forgetting(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """Without forgetting the default learner's linear model of the clicks predicted the
    played arms' clicks 0.14 too low, unflagged, until its predictions were corrected by
    each arm's recent mean residual (:class:`app.learners.ridge.DiagRidge`)."""
    check_expected_reward(run_stream(client, tenant, redis_url, {"half_life": None}))


def fixed_value(W: np.ndarray, label: int) -> float:
    """True value of always playing ``label``: the share of inputs (uniform on the sphere)
    whose right arm it is, by Monte Carlo over 400,000 inputs (standard error < 0.0005)."""
    X = np.random.default_rng([SEED, 1]).standard_normal((400_000, D))
    return float(np.mean(np.argmax(X @ W.T, axis=1) == label))


def test_evaluations_of_the_log_hold_the_true_values(default: Shown) -> None:
    """Each evaluation of the model's log (SNIPS, the estimator of each policy's value with
    the fewest assumptions) holds its policy's true value in its 95% interval: the raw click
    rate ``rho0 + (1 - rho0 - rho1) V`` with rates 0 and 0 given, the value ``V`` with the
    true rates given and, unless flagged, with the model's own (its published estimate,
    whose errors the interval carries).  12 intervals of 95%: 3 misses or more have
    probability 0.02 (Binomial(12, 0.05)); and no policy misses at every rate setting (a
    wrong policy, ``fixed:N`` evaluating ``N + 1``, misses at all three)."""
    stream = default.stream
    X = np.vstack(stream.X)
    right = np.argmax(X @ stream.W.T, axis=1)
    truth = {
        "uniform": 1.0 / K,
        "fixed:0": fixed_value(stream.W, 0),
        "logging": float(np.mean([h for b in stream.batches for h in b.hits])),
        # the default learner offers no probabilities: the model policy is its greedy label
        "model": float(np.mean(default.greedy == right)),
    }
    assert set(truth) == set(POLICIES)
    missed, checked = [], 0
    for policy, value in truth.items():
        for by in RATES_GIVEN:
            done = default.evaluations[policy, by]
            assert done["status"] == "done" and done["n"] == N, done
            assert done["rates"] == ("model" if by == "model" else "request"), done
            if by == "model" and done["calibration_unreliable"]:
                # the rates' reason first, then any other (e.g. a small effective sample)
                assert done["reason"].partition(";")[0] in (
                    "noise_rates_unreliable", "noise_rates_estimated", "noise_rates_withdrawn")
                continue
            if by == "model":  # the estimate in force at the end, its errors carried
                assert done["correction"]["rate_uncertainty"]["rho0_se"] > 0, done
            checked += 1
            target = RATES[0] + BETA * value if by == "raw" else value
            est = done["snips"]
            if not est["ci_low"] <= target <= est["ci_high"]:
                missed.append((policy, by, target, est))
    assert checked >= 8, checked
    assert len(missed) <= 2, missed
    assert all(sum(m[0] == policy for m in missed) < len(RATES_GIVEN) for policy in truth), missed


#: A challenger of known value: SquareCB with ``gamma_scale`` 0 plays uniformly at random, so
#: its true value (rate of right plays) is ``1 / K``.
UNIFORM = {"name": "uniform", "algorithm": "squarecb_diag", "params": {"gamma_scale": 0.0}}


def until(read: Callable[[], Any], done: Callable[[Any], bool], seconds: float) -> Any:
    """``read()`` again until ``done`` of it (every 0.1 s, at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def point_interval(point: dict[str, Any]) -> dict[str, Any]:
    return {"rho0": point["rho0_interval"], "rho1": point["rho1_interval"]}


def rates_source(stream: Stream, end: int) -> str:
    """The ``noise_source`` a point ending at ``end`` events must show: the trainer read
    the rates of its last batch after the stream batch before that batch's events (the
    jobs role publishes only between stream batches, and a trainer batch never spans a
    ``sync``)."""
    before = (end - 1) // BATCH - 1
    published = before >= 0 and stream.batches[before].noise["status"] == "published"
    return "estimated" if published else "initial"


def check_series(points: list[dict[str, Any]], stream: Stream, hits: np.ndarray,
                 clicks: np.ndarray) -> None:
    """Each point of the series against the events of its window (the trainer applies them
    in the order they were decided): ``online_reward`` is their mean click; its rates are
    the estimate once it was published before the window's last batch, else ``initial``
    (:func:`rates_source`); with the estimate, ``calibrated_reward`` is their rate of
    right plays and ``debiased_reward`` that of every event so far, within the sampling
    error plus the published intervals carried through ``h`` (as for the model's own
    ``debiased_reward``).  Points come every series interval (10 s), so a fast stream
    may have only its last point after the estimate: at least that one must carry it."""
    assert points[-1]["events_applied"] == N, points[-1]
    published = 0
    for before, point in zip([{"events_applied": 0}, *points[:-1]], points, strict=True):
        start, end = before["events_applied"], point["events_applied"]
        assert point["events"] == end - start, (before, point)
        if start == end:
            continue
        window = clicks[start:end]
        assert point["online_reward"] == pytest.approx(window.mean(), abs=1e-6), point
        assert point["noise_source"] == rates_source(stream, end), point
        if point["noise_source"] != "estimated":
            assert point["rho0_interval"] is None, point
            continue
        published += 1
        interval = point_interval(point)
        f, n = float(window.mean()), len(window)
        tolerance = Z * math.sqrt(f * (1 - f) / n) / BETA + rate_error(f, interval)
        assert abs(point["calibrated_reward"] - hits[start:end].mean()) <= tolerance, (
            point, hits[start:end].mean(), tolerance)
        assert abs(point["debiased_reward"] - hits[:end].mean()) <= debiased_tolerance(
            list(clicks[:end]), interval), (point, hits[:end].mean())
    assert published >= 1, "no point after the estimate was published"


def check_challengers(body: dict[str, Any], hits: np.ndarray) -> None:
    """The champion's value is its rate of right plays over the events followed, the
    uniform challenger's ``1 / K``: each within its stated 95% interval at the one-seed
    tolerance of :data:`ONE_SEED_SCALE` (the rates' error
    carried: ``test_estimators_truth.py`` checks that term's coverage over seeds), or the
    answer is flagged ``calibration_unreliable`` (``noise_rates_estimated``: rates in force
    whose error is not known; ``noise_rates_withdrawn``: an estimate a later refresh
    refused for its assumptions), when it must still order the champion well above
    uniform."""
    champion, (uniform,) = body["champion"], body["challengers"]
    assert champion["events"] == N and uniform["events"] == N, body
    assert uniform["status"] == "following", uniform
    assert hits.mean() - 1.0 / K > 0.3  # the stream's truth: a clear gap to find
    assert champion["value"]["ci_low"] > uniform["value"]["ci_high"], body
    if body["calibration_unreliable"]:
        assert body["reason"] in ("noise_rates_estimated", "noise_rates_withdrawn"), body
        return
    truth = hits.mean()
    missed = [(name, value, target) for name, value, target in (
        ("champion", champion["value"], truth), ("value", uniform["value"], 1.0 / K),
        ("ips", uniform["ips"], 1.0 / K), ("vs_champion", uniform["vs_champion"], 1.0 / K - truth))
        if not (one_seed_interval(value["estimate"], value["ci_low"], value["ci_high"])[0]
                <= target
                <= one_seed_interval(value["estimate"], value["ci_low"], value["ci_high"])[1])]
    assert missed == [], (missed, body)


def hits_and_clicks(stream: Stream) -> tuple[np.ndarray, np.ndarray]:
    """Per event of the stream, whether its play was right and its observed click."""
    return (np.array([h for b in stream.batches for h in b.hits], dtype=float),
            np.array([c for b in stream.batches for c in b.clicks], dtype=float))


def test_series_values_hold_the_truth_or_are_flagged(default: Shown) -> None:
    hits, clicks = hits_and_clicks(default.stream)
    assert rates_source(default.stream, N) == "estimated", "the estimate was not published"
    check_series(default.points, default.stream, hits, clicks)


def test_challenger_values_hold_the_truth_in_their_95_intervals_or_are_flagged(
        default: Shown) -> None:
    check_challengers(default.challengers, hits_and_clicks(default.stream)[0])


def test_apprentice_counters_are_the_observed_ones(
        client: TestClient, tenant: dict[str, str]) -> None:
    """A default model in apprentice mode serves a baseline that is right 70% of the time
    (else a random label) for 2,000 events through the click noise: its counters are the
    decisions and clicks as sent (``baseline_reward`` the mean observed click, not
    noise-corrected, as documented), ``agreement`` the share where its greedy label was the
    baseline's, ``model_value_estimate`` the mean click there."""
    rng = np.random.default_rng([SEED, 2])
    W = rng.standard_normal((K, D))
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": D,
                                        "n_classes": K, "seed": SEED, "mode": "apprentice"},
                    headers=tenant)
    assert r.status_code == 201, r.text
    clicks: list[int] = []
    agreed: list[bool] = []
    for _ in range(4):
        X = rng.standard_normal((BATCH, D))
        right = np.argmax(X @ W.T, axis=1)
        baseline = np.where(rng.random(BATCH) < 0.7, right, rng.integers(0, K, BATCH))
        r = client.post("/v1/models/m1/predict", headers=tenant, json={
            "instances": X.tolist(), "baseline": baseline.tolist()})
        assert r.status_code == 200, r.text
        preds = r.json()["predictions"]
        assert [p["label"] for p in preds] == baseline.tolist()
        hits = baseline == right
        batch = np.where(hits, rng.random(BATCH) > RATES[1], rng.random(BATCH) < RATES[0])
        clicks += batch.astype(int).tolist()
        agreed += [p["greedy_label"] == b for p, b in zip(preds, baseline.tolist(), strict=True)]
        events = [{"event_id": p["event_id"], "click": bool(c)}
                  for p, c in zip(preds, batch, strict=True)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=tenant).status_code in (200, 202)
        assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    report = client.get("/v1/models/m1", headers=tenant).json()["apprentice"]
    f, a = np.array(clicks, dtype=float), np.array(agreed)
    assert (report["decisions"], report["events"], report["agreed_events"]) == (
        4 * BATCH, 4 * BATCH, int(a.sum())), report
    assert report["agreement"] == pytest.approx(a.mean())
    assert report["baseline_reward"] == pytest.approx(f.mean())
    assert report["model_value_estimate"] == pytest.approx(f[a].mean())
