"""The label task at default settings against a stream whose truth is known.

A model created with nothing but its sizes (the default learner, the default
``anchor`` estimator) learns from a simulated stream through the real
service: 10 arms, 20 features, the right arm ``argmax W x``, clicks flipped at
rates (0.15, 0.25), batches of 500 events with a ``sync`` after each and the
jobs role run between batches.  After every batch every noise number the API
shows is checked against the truth: inside its stated interval (the rates:
within three of their standard errors, as the published estimates are
cumulative and a miss of one carries to the next), or flagged
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
    """Create a seeded label model (default learner and parameters, but for ``params``)
    with ``challengers`` and feed it the simulated stream, batch by batch."""
    rng = np.random.default_rng(SEED)
    out = Stream(W=rng.standard_normal((K, D)))
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": D,
                                        "n_classes": K, "seed": SEED, "params": dict(params)},
                    headers=tenant)
    assert r.status_code == 201, r.text
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
    (policy, whether the true rates were given)."""

    stream: Stream
    greedy: np.ndarray
    evaluations: dict[tuple[str, bool], dict[str, Any]]


#: The policies whose evaluations of the log are checked against their true values.
POLICIES = ("uniform", "fixed:0", "logging", "model")


@pytest.fixture(scope="module")
def default(redis_server: Any) -> Iterator[Shown]:
    """The stream to a default model, run once for the tests that check what it showed."""
    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    with make_client(redis_server.url) as client:
        tenant = new_tenant(client)
        stream = run_stream(client, tenant, redis_server.url)
        greedy = np.array([p["label"] for p in predict_all(client, tenant, np.vstack(stream.X),
                                                           explore=False)])
        evaluations = {
            (policy, bool(rates)): evaluation(client, tenant, redis_server.url,
                                              {"policy": policy, **rates})
            for policy in POLICIES for rates in ({}, {"rho0": RATES[0], "rho1": RATES[1]})}
    yield Shown(stream, greedy, evaluations)


def test_every_noise_number_is_inside_its_interval_or_flagged(default: Shown) -> None:
    stream = default.stream
    right: list[int] = []
    clicks: list[int] = []
    published = 0
    estimates = set()
    for b in stream.batches:
        noise, stats = b.noise, b.stats
        flagged = {bool(p["calibration_unreliable"]) for p in b.preds}
        right += b.hits
        clicks += b.clicks
        if noise["status"] == "insufficient_data":
            # no estimated number anywhere: the initial rates, flagged everywhere
            assert (noise["source"], noise["rho0"], noise["rho1"]) == ("initial", 0.0, 0.0)
            assert noise["reason"] and noise["history"] == []
            assert noise["interval"] is None or noise["interval"]["rho0"] is None
            assert stats["calibration_unreliable"] is True
            assert flagged == {True}
            continue
        assert (noise["status"], noise["source"]) == ("published", "estimated"), noise
        published += 1
        interval = noise["interval"]
        for rate, truth in zip(("rho0", "rho1"), RATES, strict=True):
            low, high = interval[rate]
            assert high - low <= noise["max_width"]
            # within Z standard errors (the 95% half-width over 1.96) of the truth
            assert abs(noise[rate] - truth) <= Z * (high - low) / 2 / 1.96, (rate, noise)
            estimates.add((low, high))
        assert stats["calibration_unreliable"] is False
        assert abs(stats["debiased_reward"] - np.mean(right)) <= debiased_tolerance(
            clicks, interval), (stats["debiased_reward"], np.mean(right))
    assert published >= 2 and len(estimates) >= 2, "the estimate was never refreshed"


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
    """Each evaluation of the model's log (IPS, SNIPS, DR) holds its policy's true value in
    its 95% interval:
    the value ``V`` with the true rates given (``h``-corrected), ``rho0 + (1 - rho0 - rho1) V``
    without (the raw click rate under the noise)."""
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
    missed = []
    for policy, value in truth.items():
        for rates in ({}, {"rho0": RATES[0], "rho1": RATES[1]}):
            done = default.evaluations[policy, bool(rates)]
            assert done["status"] == "done" and done["n"] == N, done
            target = value if rates else RATES[0] + BETA * value
            for name in ("ips", "snips", "dr"):
                est = done[name]
                if not est["ci_low"] <= target <= est["ci_high"]:
                    missed.append((policy, bool(rates), name, target, est))
    # 24 intervals of 95%: more than 3 misses has probability 0.03 if they were independent
    # (Binomial(24, 0.05)); estimators of one policy mostly miss together
    assert len(missed) <= 3, missed


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
    uniform challenger's ``1 / K``: each within its stated interval, widened from 95% to
    :data:`Z` standard errors (the values are ``h(f)`` at the published estimate, which is
    cumulative: a miss of the rates carries to every value), or the answer is flagged
    ``calibration_unreliable`` (``noise_rates_estimated``: rates in force whose error is not
    known), when it must still order the champion well above uniform."""
    champion, (uniform,) = body["champion"], body["challengers"]
    assert champion["events"] == N and uniform["events"] == N, body
    assert uniform["status"] == "following", uniform
    assert hits.mean() - 1.0 / K > 0.3  # the stream's truth: a clear gap to find
    assert champion["value"]["ci_low"] > uniform["value"]["ci_high"], body
    if body["calibration_unreliable"]:
        assert body["reason"] == "noise_rates_estimated", body
        return
    for value, truth in ((champion["value"], hits.mean()), (uniform["value"], 1.0 / K),
                         (uniform["ips"], 1.0 / K)):
        half = (value["ci_high"] - value["ci_low"]) / 2 * Z / 1.959964
        assert abs(value["estimate"] - truth) <= half, (value, truth, body)


def test_series_and_challenger_values_hold_the_truth_or_are_flagged(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    stream = run_stream(client, tenant, redis_url, challengers=[UNIFORM])
    hits = np.array([h for b in stream.batches for h in b.hits], dtype=float)
    clicks = np.array([c for b in stream.batches for c in b.clicks], dtype=float)
    # the newest point trails the model by at most one series interval (10 s) and a pass
    points = until(lambda: client.get("/v1/models/m1/series", headers=tenant).json()["points"],
                   lambda p: bool(p) and p[-1]["events_applied"] == N, 30.0)
    assert rates_source(stream, N) == "estimated", "the estimate was not published in time"
    check_series(points, stream, hits, clicks)
    body = until(lambda: client.get("/v1/models/m1/challengers", headers=tenant).json(),
                 lambda b: all(c["events"] == N for c in b["challengers"]), 30.0)
    check_challengers(body, hits)


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
