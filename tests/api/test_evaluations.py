"""POST/GET /v1/models/{id}/evaluations: an off-policy evaluation on the decision log, queued
to the worker's jobs role, answering what ``noisyloop evaluate --json`` prints."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import redis

import workers.evaluations
from app.cli import main
from app.store import Store
from app.worker_settings import WorkerSettings
from tests.api.conftest import TestClient, new_model, new_tenant, post_feedback, predict_all
from workers.worker import Worker


def run_jobs(redis_url: str, **settings: Any) -> int:
    """One drain of a worker's jobs role (it runs the queued evaluations)."""
    async def drain() -> int:
        store = Store.from_url(redis_url)
        try:
            return await Worker(store, WorkerSettings(roles=("jobs",), worker_id="ev",
                                                      nrest_threads=True, **settings)).drain()
        finally:
            await store.close()
    return asyncio.run(drain())


def feed(client: TestClient, auth: dict[str, str], n: int) -> None:
    """``n`` rounds where a click means the played label is the true one (argmax of x)."""
    X = np.random.default_rng(0).standard_normal((n, 4))
    preds = predict_all(client, auth, X)
    events = [{"event_id": p["event_id"], "click": p["label"] == int(np.argmax(x[:3]))}
              for p, x in zip(preds, X, strict=True)]
    for i in range(0, n, 500):
        assert post_feedback(client, auth, {"events": events[i:i + 500]}).status_code == 202
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200


def evaluation(client: TestClient, auth: dict[str, str], redis_url: str,
               body: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """Queue an evaluation, run it on a worker of ``settings`` and read its job."""
    r = client.post("/v1/models/m1/evaluations", json=body, headers=auth)
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert client.get(f"/v1/models/m1/evaluations/{job_id}",
                      headers=auth).json() == {"job_id": job_id, "status": "queued"}
    assert run_jobs(redis_url, **settings) >= 1
    r = client.get(f"/v1/models/m1/evaluations/{job_id}", headers=auth)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.slow
def test_evaluations_answer_what_the_command_line_prints(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant, params={"gamma": 0.3})
    feed(client, tenant, 1500)
    done = evaluation(client, tenant, redis_url, {"policy": "uniform", "bootstrap": 50})
    assert done["status"] == "done" and done["n"] == 1500 and done["format"] == "noisyloop"
    assert done["policy"] == "uniform" and done["bootstrap"] == 50
    for name in ("ips", "snips", "dr"):  # uniform over 3 labels, one right: 1/3
        assert done[name]["ci_low"] <= 1 / 3 <= done[name]["ci_high"], name
    logging = evaluation(client, tenant, redis_url, {"policy": "logging", "bootstrap": 20})
    assert logging["ess"] == 1500
    model = evaluation(client, tenant, redis_url, {"policy": "model", "rho0": 0.1,
                                                   "rho1": 0.2, "since": "2000-01-01"})
    assert model["status"] == "done" and model["correction"]["rho0"] == 0.1
    greedy = evaluation(client, tenant, redis_url, {"policy": "model:greedy"})
    assert greedy["status"] == "done" and greedy["policy"] == "model:greedy"
    assert greedy["ess"] < model["ess"]  # one label per context: fewer logged plays agree
    later = evaluation(client, tenant, redis_url, {"policy": "fixed:2", "since": "9999-01-01"})
    assert later["status"] == "failed" and "no events" in later["error"]


def test_bad_requests_and_other_tenants(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    for body, field in (({"policy": "best"}, "policy"), ({"policy": "uniform", "rho0": 0.1},
                                                         None),
                        ({"policy": "fixed:3"}, "policy"),  # 3 labels: 0..2
                        ({"policy": "uniform", "since": "soon"}, "since"),
                        ({"policy": "uniform", "bootstrap": 0}, "bootstrap"),
                        ({"policy": "uniform", "rho0": 0.6, "rho1": 0.5}, "rho1")):
        r = client.post("/v1/models/m1/evaluations", json=body, headers=tenant)
        assert r.status_code == 422, (body, r.text)
        if field:
            assert r.json()["error"]["field"] == field, r.json()
    r = client.post("/v1/models/m1/evaluations", json={"policy": "uniform"}, headers=tenant)
    job_id = r.json()["job_id"]
    other = new_tenant(client, "other")
    assert client.get(f"/v1/models/m1/evaluations/{job_id}", headers=other).status_code == 404
    r = client.get("/v1/models/m1/evaluations/nope", headers=tenant)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_evaluation"


def test_a_model_lists_the_policies_its_log_is_evaluated_for_and_no_other_is_queued(
        client: TestClient, tenant: dict[str, str]) -> None:
    label = new_model(client, tenant)
    assert label["evaluation_policies"] == ["model", "model:greedy", "uniform", "logging",
                                            "fixed:N", "configuration"]
    regression = new_model(client, tenant, model_id="m2", task="regression", algorithm="ors",
                           n_classes=None)
    assert regression["evaluation_policies"] == []
    r = client.post("/v1/models/m2/evaluations", json={"policy": "uniform"}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"] == {
        "code": "evaluation_unsupported", "field": "policy",
        "message": "the service evaluates the decision logs of continuous and label and rank "
                   "models, not of regression models"}, r.text


@pytest.mark.slow
def test_a_configuration_trains_on_the_earlier_events_and_is_evaluated_on_the_later(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant, params={"gamma": 0.3})
    feed(client, tenant, 1000)
    config = {"algorithm": "linucb_diag", "params": {"alpha": 0.1}}
    done = evaluation(client, tenant, redis_url, {"policy": config, "train_fraction": 0.4,
                                                  "bootstrap": 50})
    assert done["status"] == "done", done
    assert done["policy"] == config and done["train_fraction"] == 0.4 and done["n"] == 600
    train, evaluated = done["split"]["train"], done["split"]["evaluate"]
    assert (train["events"], train["rows"], evaluated["rows"]) == (400, [0, 399], [400, 999])
    # stream ids order in time (a feedback batch's events share one: the split may cut it)
    assert train["stream_ids"][1] <= evaluated["stream_ids"][0]
    uniform = evaluation(client, tenant, redis_url, {"policy": "uniform", "bootstrap": 50})
    assert done["snips"]["value"] > uniform["snips"]["ci_high"]  # it learned which label pays
    for body, field in (
            ({"policy": {"algorithm": "perceptron"}}, "policy.algorithm"),
            ({"policy": {"algorithm": "ors"}}, "policy.algorithm"),
            ({"policy": {"algorithm": "linucb_diag", "params": {"beta": 1}}},
             "policy.params.beta"),
            ({"policy": {"algorithm": "linucb_diag", "params": {"alpha": "1"}}},
             "policy.params.alpha"),
            ({"policy": config, "train_fraction": 1.0}, "train_fraction")):
        r = client.post("/v1/models/m1/evaluations", json=body, headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (body, r.text)
    r = client.post("/v1/models/m1/evaluations", json={"policy": "uniform",
                                                        "train_fraction": 0.5}, headers=tenant)
    assert r.status_code == 422 and "configuration" in r.json()["error"]["message"], r.text


def rank_rounds(client: TestClient, tenant: dict[str, str], n: int
                ) -> tuple[np.ndarray, float]:
    """A 2-slot ``ridge_pl`` model m1 ranking ``n`` requests of 3 to 6 candidates from a pool
    of 24 items, each clicked with its own relevance wherever shown: the clicks per slot and
    the value of a uniform ranking of a request's candidates in every slot (the mean
    relevance of those candidates)."""
    new_model(client, tenant, task="rank", algorithm="ridge_pl", n_classes=None,
              n_features=2, n_action_features=2, slots=2)
    rng = np.random.default_rng(1)
    relevance = np.linspace(0.1, 0.9, 24)
    pool = [{"id": f"item-{k}", "features": [np.cos(k), np.sin(k)]} for k in range(24)]
    picks = [rng.choice(24, size=rng.integers(3, 7), replace=False) for _ in range(n)]
    requests = [{"features": rng.standard_normal(2).tolist(),
                 "actions": [pool[k] for k in pick]} for pick in picks]
    r = client.post("/v1/models/m1/rank", json={"requests": requests}, headers=tenant)
    assert r.status_code == 200, r.text
    clicked, events = [], []
    for result in r.json()["results"]:
        chosen = [x["id"] for x in result["ranking"]
                  if rng.random() < relevance[int(x["id"].split("-")[1])]]
        clicked.append([x["id"] in chosen for x in result["ranking"]])
        events.append({"event_id": result["event_id"], "clicks": chosen})
    f = post_feedback(client, tenant, {"events": events})
    assert f.status_code == 202 and f.json()["accepted"] == 600, f.text
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    return np.array(clicked, dtype=float), float(np.mean([relevance[p].mean() for p in picks]))


@pytest.mark.slow
def test_a_rank_models_uniform_policy_ranks_each_requests_own_candidates(
        client: TestClient, tenant: dict[str, str], redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A uniform ranking of a request's candidates is worth the mean relevance of those
    candidates in every slot (spread over the pool instead, IPS said a fifth of it).  The
    window of 600 rankings is streamed in chunks of 250 events, and the numbers are those
    of ``noisyloop evaluate`` on the window's export."""
    clicks, truth = rank_rounds(client, tenant, 600)
    monkeypatch.setattr(workers.evaluations, "CHUNK_EVENTS", 250)
    export = tmp_path / "log.jsonl"
    export.write_bytes(client.get("/v1/models/m1/log", params={"limit": 10_000},
                                  headers=tenant).content)
    one = {"max_dense_cells": 1}  # a ranking a batch
    logging = evaluation(client, tenant, redis_url, {"policy": "logging", "bootstrap": 50},
                         **one)
    assert logging["status"] == "done", logging
    assert logging["n"] == 600 and logging["slot_impressions"] == 1200, logging
    assert logging["ips"]["value"] == pytest.approx(clicks[:, 0].mean())
    assert [p["position"] for p in logging["positions"]] == [0, 1]
    for position in logging["positions"]:
        assert position["n"] == 600
        assert position["ips"]["value"] == pytest.approx(clicks[:, position["position"]].mean())
    assert logging["slates"]["rips"]["value"] == pytest.approx(clicks.sum(axis=1).mean())
    uniform = evaluation(client, tenant, redis_url, {"policy": "uniform", "bootstrap": 200},
                         **one)
    assert uniform["n"] == 600 and uniform["slot_impressions"] == 1200, uniform
    for name in ("ips", "snips", "dr"):
        assert uniform[name]["ci_low"] <= truth <= uniform[name]["ci_high"], (name, truth, uniform)
    for position in uniform["positions"]:
        assert position["snips"]["ci_low"] <= truth <= position["snips"]["ci_high"], position
    assert uniform["slates"]["snrips"]["ci_low"] <= 2 * truth <= uniform["slates"]["snrips"][
        "ci_high"], uniform["slates"]
    for done, boot in ((logging, "50"), (uniform, "200")):
        capsys.readouterr()
        assert main(["evaluate", "--no-progress", "--log", str(export), "--format",
                     "noisyloop", "--policy", done["policy"], "--bootstrap", boot]) == 0
        printed = json.loads(capsys.readouterr().out)
        for got, want in [(done, printed), (done["slates"], printed["slates"]),
                          *zip(done["positions"], printed["positions"], strict=True)]:
            for name in ("ips", "snips", "dr", "rips", "snrips"):
                for field in ("value", "ci_low", "ci_high") if name in got else ():
                    assert got[name][field] == pytest.approx(want[name][field], rel=1e-9), (
                        done["policy"], name, field)
    for policy in ("model", "fixed:1", {"algorithm": "ridge_pl"}):
        r = client.post("/v1/models/m1/evaluations", json={"policy": policy}, headers=tenant)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "evaluation_unsupported", r.text
        assert "uniform, logging" in r.json()["error"]["message"], r.text


@pytest.mark.slow
def test_a_failed_slow_or_orphaned_evaluation_ends_failed_never_running_forever(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    new_model(client, tenant)
    feed(client, tenant, 50)

    def boom(*args: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(workers.evaluations, "_fit_chunk", boom)  # its first pool call
    failed = evaluation(client, tenant, redis_url, {"policy": "uniform"})
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError('boom')"

    def slow(*args: Any) -> dict[str, Any]:
        time.sleep(0.5)
        return {}

    monkeypatch.setattr(workers.evaluations, "_fit_chunk", slow)
    job_id = client.post("/v1/models/m1/evaluations", json={"policy": "uniform"},
                         headers=tenant).json()["job_id"]
    assert run_jobs(redis_url, nrest_timeout=0.1) == 1
    r = client.get(f"/v1/models/m1/evaluations/{job_id}", headers=tenant).json()
    assert r["status"] == "failed" and r["error"] == "took longer than 0.1 s"
    # a worker that died while running a job: it reads as failed once its deadline passed
    job_id = client.post("/v1/models/m1/evaluations", json={"policy": "uniform"},
                         headers=tenant).json()["job_id"]
    r = redis.Redis.from_url(redis_url)
    (key,) = r.keys(f"*:eval:{job_id}")
    r.hset(key, mapping={"status": "running", "deadline": repr(time.time() + 60)})
    assert client.get(f"/v1/models/m1/evaluations/{job_id}",
                      headers=tenant).json()["status"] == "running"
    r.hset(key, "deadline", repr(time.time() - 1))
    assert client.get(f"/v1/models/m1/evaluations/{job_id}", headers=tenant).json() == {
        "job_id": job_id, "status": "failed",
        "error": "the worker running it stopped before it finished"}
    r.close()


def same_estimates(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert one["n"] == other["n"] and one["ess"] == pytest.approx(other["ess"], rel=1e-9)
    for name in ("ips", "snips", "dr"):
        for field in ("value", "ci_low", "ci_high"):
            assert one[name][field] == pytest.approx(other[name][field], rel=1e-9), name


@pytest.mark.slow
def test_a_configuration_streams_its_whole_window_as_the_command_line_evaluates_it(
        client: TestClient, tenant: dict[str, str], redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    new_model(client, tenant)
    feed(client, tenant, 600)
    time.sleep(0.01)
    until = time.time()  # applied before: the first 600 events
    time.sleep(0.01)
    assert client.post("/v1/models/m1/reset", headers=tenant).status_code == 200  # a marker
    feed(client, tenant, 400)
    config = {"algorithm": "rcnbf"}  # its learning steps matter (chunks of 170 cut them)
    body = {"policy": config, "train_fraction": 0.45, "rho0": 0.05, "rho1": 0.1,
            "bootstrap": 50}
    done = {}
    # one chunk; chunks that cut the learning steps of 100; and spans of 13 events made
    # dense at a time within those (max_dense_cells: 13 rows of 4 features and their stack)
    for chunk, cells in ((100_000, None), (170, None), (170, 2 * 4 * 13)):
        monkeypatch.setattr(workers.evaluations, "CHUNK_EVENTS", chunk)
        key = chunk if cells is None else cells
        done[key] = evaluation(client, tenant, redis_url, body,
                               **({} if cells is None else {"max_dense_cells": cells}))
        assert done[key]["status"] == "done" and done[key]["n"] == 550, done[key]
    for key in (170, 2 * 4 * 13):
        same_estimates(done[key], done[100_000])
        assert done[key]["split"] == done[100_000]["split"]
    export = tmp_path / "log.jsonl"
    export.write_bytes(client.get("/v1/models/m1/log", params={"limit": 10_000},
                                  headers=tenant).content)
    lines = [orjson.loads(line) for line in export.read_bytes().splitlines()]
    assert [line["type"] for line in lines].count("reset") == 1
    ids = [line["stream_id"] for line in lines if "action" in line]
    capsys.readouterr()
    assert main(["evaluate", "--no-progress", "--log", str(export), "--format", "noisyloop",
                 "--policy", f"config:{json.dumps(config)}", "--train-fraction", "0.45",
                 "--rho0", "0.05", "--rho1", "0.1", "--bootstrap", "50"]) == 0
    printed = json.loads(capsys.readouterr().out)
    same_estimates(done[170], printed)
    assert done[170]["split"] == printed["split"] == {
        "train": {"events": 450, "rows": [0, 449], "stream_ids": [ids[0], ids[449]]},
        "evaluate": {"events": 550, "rows": [450, 999], "stream_ids": [ids[450], ids[999]]}}
    earlier = evaluation(client, tenant, redis_url, {**body, "until": repr(until)})
    assert earlier["n"] == 330 and earlier["split"]["evaluate"]["stream_ids"] == [
        ids[270], ids[599]], earlier


def test_a_label_evaluation_streams_its_whole_window_as_the_command_line_reads_it(
        client: TestClient, tenant: dict[str, str], redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    new_model(client, tenant)
    feed(client, tenant, 1000)
    monkeypatch.setattr(workers.evaluations, "CHUNK_EVENTS", 250)
    done = evaluation(client, tenant, redis_url, {"policy": "fixed:1", "rho0": 0.05,
                                                  "rho1": 0.1, "bootstrap": 50},
                      max_dense_cells=2 * 4 * 7)  # 7 rows of 4 features, and their stack
    assert done["status"] == "done" and done["n"] == 1000, done
    export = tmp_path / "log.jsonl"
    export.write_bytes(client.get("/v1/models/m1/log", params={"limit": 10_000},
                                  headers=tenant).content)
    capsys.readouterr()
    assert main(["evaluate", "--no-progress", "--log", str(export), "--format", "noisyloop",
                 "--policy", "fixed:1", "--rho0", "0.05", "--rho1", "0.1", "--bootstrap",
                 "50"]) == 0
    same_estimates(done, json.loads(capsys.readouterr().out))


@pytest.mark.slow
def test_a_label_evaluation_without_rates_corrects_by_the_models_own(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """Without rates in the request a label log is corrected by the model's rates in force,
    flagged as its challengers' values are (it was read raw, saying nothing)."""
    new_model(client, tenant)
    feed(client, tenant, 600)
    raw = evaluation(client, tenant, redis_url, {"policy": "logging", "bootstrap": 20})
    # rates nobody gave: nothing corrected, and flagged
    assert (raw["rates"], raw["calibration_unreliable"], raw["reason"]) == (
        "model", True, "noise_rates_unreliable")
    assert raw["correction"]["rho0"] is None
    assert client.put("/v1/models/m1/noise", json={"rho0": 0.05, "rho1": 0.1},
                      headers=tenant).status_code == 200
    own = evaluation(client, tenant, redis_url, {"policy": "logging", "bootstrap": 20})
    assert (own["rates"], own["calibration_unreliable"]) == ("model", False)
    assert (own["correction"]["rho0"], own["correction"]["rho1"]) == (0.05, 0.1)
    assert own["ips"]["value"] == pytest.approx((raw["ips"]["value"] - 0.05) / 0.85)
    given = evaluation(client, tenant, redis_url,
                       {"policy": "logging", "rho0": 0.0, "rho1": 0.0, "bootstrap": 20})
    assert (given["rates"], given["calibration_unreliable"]) == ("request", False)
    assert given["ips"]["value"] == pytest.approx(raw["ips"]["value"])


@pytest.mark.slow
def test_a_label_evaluation_on_few_effective_events_is_flagged_with_a_bound_that_holds(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """``fixed:2`` on 150 plays rests on the few that played label 2 (an effective sample
    size below 100): flagged ``insufficient_data``, each interval widened to the betting
    bound, which holds its value 1/3 (the share of inputs whose right label is 2); rank
    logs' slots were flagged so, label logs were not."""
    new_model(client, tenant)
    feed(client, tenant, 150)
    done = evaluation(client, tenant, redis_url,
                      {"policy": "fixed:2", "rho0": 0.0, "rho1": 0.0, "bootstrap": 50})
    assert done["ess"] < 100 and done["insufficient_data"] is True, done
    assert "effective sample size" in done["reason"]
    for name in ("ips", "snips", "dr"):
        assert done[name]["ci_low"] <= 1 / 3 <= done[name]["ci_high"], (name, done)
    logging = evaluation(client, tenant, redis_url, {"policy": "logging", "bootstrap": 20})
    assert logging["ess"] == 150 and "insufficient_data" not in logging


@pytest.mark.slow
def test_a_configuration_on_few_effective_events_is_flagged_and_says_its_rates(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    """A configuration evaluated on 75 events (an effective sample size below 100 whatever
    its weights) is flagged ``insufficient_data`` with intervals widened to the betting
    bound, which holds its value (between 0 and 1); without rates in the request it is
    corrected by the model's own and says so, as the other policies' evaluations."""
    new_model(client, tenant)
    feed(client, tenant, 150)
    config = {"algorithm": "linucb_diag", "params": {"alpha": 0.1}}
    done = evaluation(client, tenant, redis_url, {"policy": config, "bootstrap": 20})
    assert done["status"] == "done" and done["n"] == 75, done
    assert done["ess"] < 100 and done["insufficient_data"] is True, done
    assert "effective sample size" in done["reason"]
    for name in ("ips", "snips", "dr"):  # the betting bound of a click rate: in [0, 1]
        assert done[name]["ci_low"] <= done[name]["ci_high"], (name, done)
        assert done[name]["ci_high"] - done[name]["ci_low"] > 0.2, (name, done)
    # the model's rates nobody gave: flagged for them too, both reasons said
    assert (done["rates"], done["calibration_unreliable"]) == ("model", True), done
    assert done["reason"].startswith("noise_rates_unreliable; "), done
    assert done["split"]["evaluate"]["events"] == 75


def test_a_configuration_is_evaluated_on_rank_logs_that_hold_every_candidate(
        client: TestClient, tenant: dict[str, str]) -> None:
    """A rank model's configuration is replayed on its log, which needs one slot and every
    candidate's features logged: a `personalizer` loop offers it; a plain one-slot rank
    model (candidates not logged) and a two-slot one refuse it, saying why."""
    from tests.api.test_rank import new_ranker

    loop = client.post("/v1/models", headers=tenant, json={
        "model_id": "loop", "preset": "personalizer"})
    assert loop.status_code == 201, loop.text
    assert loop.json()["evaluation_policies"] == ["uniform", "logging", "configuration"]
    for model_id, slots, why in (("one", 1, "do not log every candidate's features"),
                                 ("two", 2, "single-slot models, this one fills 2 slots")):
        model = new_ranker(client, tenant, model_id, slots=slots)
        assert model["evaluation_policies"] == ["uniform", "logging"]
        r = client.post(f"/v1/models/{model_id}/evaluations", headers=tenant,
                        json={"policy": {"algorithm": model["algorithm"]}})
        assert r.status_code == 422, r.text
        assert (r.json()["error"]["field"], r.json()["error"]["code"]) == (
            "policy", "evaluation_unsupported")
        assert why in r.json()["error"]["message"], r.text
