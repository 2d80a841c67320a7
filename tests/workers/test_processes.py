"""The service with separate ``noisyloop worker`` processes against a real Redis.

The API runs in process (starlette's TestClient, no in-process trainer); the
workers are real child processes started with the command line, so SIGKILL
and SIGTERM hit them as they would in production.
"""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.sim.datasets import synthetic
from app.sim.feedback import noisy_clicks
from app.sim.rank import RankSimulator
from app.store import codec
from app.store.decisionlog import LogEntry
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, make_client, new_model, new_tenant

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

FAST = ["--lease-ttl", "1", "--heartbeat-ttl", "2", "--flush-interval", "0.02",
        "--poll-interval", "0.1"]


def start_worker(redis_url: str, worker_id: str, *args: str) -> subprocess.Popen[bytes]:
    """``noisyloop worker`` as a child process (its log goes to the test's stderr)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "NOISYLOOP_LOG_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-m", "app.cli", "worker", "--redis-url", redis_url,
                             "--worker-id", worker_id, *FAST, *args], env=env)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.terminate()  # clean shutdown: its NREst child process goes too
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.fixture
def api(redis_url: str) -> Iterator[TestClient]:
    with make_client(redis_url, trainer=False) as c:
        yield c


def play(client: TestClient, auth: dict[str, str], model: str, X: np.ndarray,
         click_of: Any) -> list[dict[str, Any]]:
    """Predict for every row of X, post ``click_of(labels)``; return the joined events."""
    r = client.post(f"/v1/models/{model}/predict", json={"instances": X.tolist()}, headers=auth)
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    played = np.array([p["label"] for p in preds])
    clicks = click_of(played)
    body = {"events": [{"event_id": p["event_id"], "click": bool(c)}
                       for p, c in zip(preds, clicks, strict=True)]}
    r = client.post(f"/v1/models/{model}/feedback", json=body, headers=auth)
    assert r.status_code == 202 and r.json()["accepted"] == len(preds), r.text
    return [{"x": x, "greedy": np.array(p["greedy_label"]), "played": np.array(p["label"]),
             "prob": np.array(p["probability"]), "click": np.array(float(c))}
            for x, p, c in zip(X, preds, clicks, strict=True)]


def snapshot_state(client: TestClient, auth: dict[str, str], model: str) -> dict[str, np.ndarray]:
    r = client.get(f"/v1/models/{model}/snapshot", headers=auth)
    assert r.status_code == 200, r.text
    return {name: np.load(io.BytesIO(base64.b64decode(a["data_b64"])), allow_pickle=False)
            for name, a in r.json()["state"].items()}


def sync(client: TestClient, auth: dict[str, str], model: str, timeout: float = 60) -> None:
    r = client.post(f"/v1/models/{model}/sync", params={"timeout": timeout}, headers=auth)
    assert r.status_code == 200, r.text


def assert_logged_once(r: redis.Redis, mk: ModelKeys, contexts: list[np.ndarray]) -> None:
    """The decision log holds every applied event exactly once, in the order applied (the
    order the feedback was posted in), with the context it was decided on."""
    log = [e for i, fields in r.xrange(mk.log) for e in LogEntry(i.decode(), fields).events()]
    assert len(log) == len(contexts)
    # each posted batch is one stream entry: its events share a stream id
    assert len({e.event_id for e in log}) == len({(e.stream_id, e.event_id) for e in log}) \
        == len(contexts)
    for event, x in zip(log, contexts, strict=True):
        np.testing.assert_array_equal(codec.decode(event.context)["x"], x)


def test_two_workers_one_killed_apply_every_event_exactly_once(
        api: TestClient, redis_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    auth = new_tenant(api)
    models = ["m0", "m1"]
    configs = {m: new_model(api, auth, model_id=m, algorithm="rcnbf", n_features=20,
                            n_classes=5, seed=i, params={"gamma": 0.1, "rho0": 0.1, "rho1": 0.2})
               for i, m in enumerate(models)}
    procs += [start_worker(redis_url, w, "--roles", "trainer", "--batch-size", "100")
              for w in ("wa", "wb")]
    rng = np.random.default_rng(0)
    events: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
    rounds, per_round = 6, 400
    owners: list[str | None] = []
    with redis.Redis.from_url(redis_url) as r:
        for k in range(rounds):
            for m in models:
                X = rng.standard_normal((per_round, 20))
                events[m] += play(api, auth, m, X,
                                  lambda played: (rng.random(len(played)) < 0.4).astype(float))
            if k == 1:  # both workers own a model now: kill the owner of m0 mid-stream
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    owners = [(r.get(ModelKeys("acme", m).lease) or b"").decode()
                              for m in models]
                    if sorted(owners) == ["wa", "wb"]:
                        break
                    time.sleep(0.05)
                assert sorted(owners) == ["wa", "wb"], owners
                victim = procs[0] if owners[0] == "wa" else procs[1]
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
        for m in models:
            sync(api, auth, m)
            got = api.get(f"/v1/models/{m}", headers=auth).json()["stats"]
            assert got["events_applied"] == got["feedback_accepted"] == rounds * per_round
            learner = build_learner(ModelConfig.of(configs[m]))
            learner.learn_many(stack_events(events[m]))
            state = snapshot_state(api, auth, m)
            for name, expected in learner.get_state().items():
                np.testing.assert_allclose(state[name], expected, rtol=1e-9, atol=1e-9)
            assert r.xlen(ModelKeys("acme", m).dead_letter) == 0
            assert_logged_once(r, ModelKeys("acme", m), [e["x"] for e in events[m]])
    survivor = procs[1] if victim is procs[0] else procs[0]
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(15) == 0  # clean shutdown
    with redis.Redis.from_url(redis_url) as r:
        assert all(r.get(ModelKeys("acme", m).lease) is None for m in models)


def play_rank(client: TestClient, auth: dict[str, str], model: str, sim: RankSimulator,
              n: int) -> list[dict[str, Any]]:
    """Rank ``n`` simulated requests, post their clicks; return the joined events as the
    learner reads them (the logged score of a shown candidate is its expected_reward: the
    score clipped to [0, 1], the band it is counted in)."""
    requests = [sim.request() for _ in range(n)]
    r = client.post(f"/v1/models/{model}/rank", json={"requests": [
        {"features": q.x.tolist(), "actions": [{"id": str(i), "features": a.tolist()}
                                               for i, a in zip(q.ids, q.actions, strict=True)]}
        for q in requests]}, headers=auth)
    assert r.status_code == 200, r.text
    events, joined = [], []
    for q, result in zip(requests, r.json()["results"], strict=True):
        row = {str(i): k for k, i in enumerate(q.ids)}
        ranking = np.array([row[x["id"]] for x in result["ranking"]])
        clicks = sim.clicks(q, ranking)
        events.append({"event_id": result["event_id"],
                       "clicks": [x["id"] for x, c in zip(result["ranking"], clicks,
                                                           strict=True) if c]})
        joined.append({"x": q.x, "actions": q.actions[ranking], "shown": np.int64(len(ranking)),
                       "scores": np.array([x["expected_reward"] for x in result["ranking"]]),
                       "clicks": clicks})
    r = client.post(f"/v1/models/{model}/feedback", json={"events": events}, headers=auth)
    assert r.status_code == 202 and r.json()["accepted"] == n, r.text
    return joined


def test_rank_feedback_applied_exactly_once_across_a_trainer_sigkill(
        api: TestClient, redis_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    auth = new_tenant(api)
    sim = RankSimulator(n_features=4, n_action_features=3, seed=0)
    config = {"model_id": "feed", "task": "rank", "n_features": 4, "n_action_features": 3,
              "slots": sim.slots, "seed": 0}
    r = api.post("/v1/models", json=config, headers=auth)
    assert r.status_code == 201, r.text
    procs += [start_worker(redis_url, w, "--roles", "trainer", "--batch-size", "100")
              for w in ("wa", "wb")]
    events: list[dict[str, Any]] = []
    rounds, per_round = 6, 400
    with redis.Redis.from_url(redis_url) as r:
        for k in range(rounds):
            events += play_rank(api, auth, "feed", sim, per_round)
            if k == 1:  # kill the trainer that holds the model's lease mid-stream
                deadline = time.monotonic() + 20
                owner = ""
                while time.monotonic() < deadline and not owner:
                    owner = (r.get(ModelKeys("acme", "feed").lease) or b"").decode()
                    time.sleep(0.05)
                assert owner in ("wa", "wb"), owner
                victim = procs[0] if owner == "wa" else procs[1]
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
        sync(api, auth, "feed")
        got = api.get("/v1/models/feed", headers=auth).json()["stats"]
        assert got["events_applied"] == got["feedback_accepted"] == rounds * per_round
        assert r.xlen(ModelKeys("acme", "feed").dead_letter) == 0
        assert_logged_once(r, ModelKeys("acme", "feed"), [e["x"] for e in events])
    stored = ModelConfig.of(dict(config, algorithm="ridge_pl", n_classes=None,
                                 params={"n_action_features": 3, "slots": sim.slots}))
    learner = build_learner(stored)
    padded = []
    for e in events:  # the learner logs every slot: rows past the shown ones are zeros
        shown = int(e["shown"])
        pad = {name: np.zeros((sim.slots, *np.shape(e[name])[1:]))
               for name in ("actions", "scores", "clicks")}
        for name, arr in pad.items():
            arr[:shown] = e[name]
        padded.append({"x": e["x"], "shown": e["shown"], **pad})
    learner.learn_many(stack_events(padded))
    state = snapshot_state(api, auth, "feed")
    for name in ("precision_", "clicks_by_slot_", "rows_by_slot_", "band_rows_",
                 "band_clicks_", "count_"):
        np.testing.assert_allclose(state[name], learner.get_state()[name], rtol=1e-9,
                                   atol=1e-9, err_msg=name)


def test_sweeper_process_expires_decisions_and_late_feedback_gets_404(
        api: TestClient, redis_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    auth = new_tenant(api)
    new_model(api, auth, model_id="w", n_features=4, n_classes=3,
              feedback={"wait_seconds": 1, "on_timeout": "no_click"})
    procs.append(start_worker(redis_url, "sweep", "--roles", "sweeper,trainer"))
    r = api.post("/v1/models/w/predict", json={"instances": [[1, 0, 0, 0.5]] * 6}, headers=auth)
    ids = [p["event_id"] for p in r.json()["predictions"]]
    for eid in ids[:2]:
        assert api.post("/v1/models/w/feedback", json={"event_id": eid, "click": True},
                        headers=auth).status_code == 202
    deadline = time.monotonic() + 15
    stats: dict[str, int] = {}
    while time.monotonic() < deadline:
        stats = api.get("/v1/models/w", headers=auth).json()["stats"]
        if stats["events_expired"] == 4 and stats["events_applied"] == 6:
            break
        time.sleep(0.1)
    assert stats["events_expired"] == 4 and stats["events_applied"] == 6, stats
    late = api.post("/v1/models/w/feedback", json={"event_id": ids[-1], "click": True},
                    headers=auth)
    assert late.status_code == 404 and late.json()["error"]["code"] == "unknown_event"
    again = api.post("/v1/models/w/feedback", json={"event_id": ids[0], "click": True},
                     headers=auth)
    assert again.status_code == 409


def test_nrest_estimates_synsep_noise_and_rcine_uses_it(
        api: TestClient, redis_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    # NREst needs enough samples per class: with 3,000 (333 per class) the estimate of
    # rho0 ranged over 0.10-0.31 across seeds; with 10,000 every seed tried was within 0.1
    rho0, rho1, n_s = 0.1, 0.3, 10_000
    auth = new_tenant(api)
    new_model(api, auth, model_id="r", algorithm="rcine", n_features=400, n_classes=9, seed=1,
              params={"gamma": 0.2, "n_s": n_s})
    # the anchor estimator is the default; this test is about NREst, the paper's estimator
    r = api.put("/v1/models/r/noise", json={"estimator": "nrest"}, headers=auth)
    assert r.status_code == 200, r.text
    procs.append(start_worker(redis_url, "nr", "--roles", "trainer,jobs"))
    rng = np.random.default_rng(7)
    X, y = synthetic(n_s + 1000, rng)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    started = time.monotonic()
    for lo in range(0, n_s, 1000):
        rows = slice(lo, lo + 1000)
        play(api, auth, "r", X[rows],
             lambda played, y=y[rows]: noisy_clicks((played == y).astype(float), rho0, rho1, rng))
        sync(api, auth, "r")  # the next decisions use the updated weights: reproducible
    deadline = time.monotonic() + 90
    noise: dict[str, Any] = {}
    while time.monotonic() < deadline:  # the periodic run after n_s new samples
        noise = api.get("/v1/models/r/noise", headers=auth).json()
        if noise["source"] == "estimated":
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    assert noise["source"] == "estimated", noise
    assert abs(noise["rho0"] - rho0) < 0.1 and abs(noise["rho1"] - rho1) < 0.1, noise
    assert noise["n_samples"] == n_s and len(noise["history"]) == 1
    # rcine learns with the estimate from its next batch on
    play(api, auth, "r", X[n_s:n_s + 100],
         lambda played: noisy_clicks((played == y[n_s:n_s + 100]).astype(float), rho0, rho1, rng))
    sync(api, auth, "r")
    rates = snapshot_state(api, auth, "r")["noise_rates_"]
    np.testing.assert_allclose(rates, [noise["rho0"], noise["rho1"]])
    # a queued run through the API (?wait=true) answers with the new estimate
    r = api.post("/v1/models/r/noise/estimate", params={"wait": "true", "timeout": 90},
                 headers=auth)
    assert r.status_code == 200, r.text
    assert len(r.json()["history"]) == 2
    assert (r.json()["estimate"]["estimator"], r.json()["estimate"]["status"]) == (
        "nrest", "published")
    print(f"NREst through the service: {elapsed:.1f} s to the first estimate "
          f"({noise['rho0']:.3f}, {noise['rho1']:.3f})")
