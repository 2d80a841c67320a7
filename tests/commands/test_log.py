"""``noisyloop log export`` against a served service, and ``noisyloop evaluate --format
noisyloop`` on what it exported (label and rank logs, a model snapshot's policy)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from noisyloop_client import calls

from app.api import decisionlog
from app.cli import main
from app.evaluation.policies import learner_policy
from app.evaluation.servicelog import read_label_log, snapshot_learner
from app.store.embedded import EmbeddedRedis
from tests.api.test_evaluations import run_jobs
from tests.client.conftest import Service, admin, api_key, service  # noqa: F401 (fixtures)

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

N_FEATURES, N_CLASSES = 5, 3


@pytest.fixture
def http(service: Service, api_key: str) -> httpx.Client:  # noqa: F811
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {api_key}"},
                      timeout=60) as c:
        yield c


def feed_label_model(http: httpx.Client, n: int, seed: int = 0) -> dict[str, int]:
    """A label model fed ``n`` simulated rounds (click: the played label is the true one);
    returns each event's true label."""
    r = http.post("/v1/models", json={"model_id": "lab", "task": "label", "algorithm": "rcnbf",
                                      "n_features": N_FEATURES, "n_classes": N_CLASSES,
                                      "seed": seed, "params": {"gamma": 0.3}})
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((N_CLASSES, N_FEATURES))
    truth: dict[str, int] = {}
    for _ in range(n // 500):
        X = rng.standard_normal((500, N_FEATURES))
        y = (X @ W.T).argmax(axis=1)
        r = http.post("/v1/models/lab/predict", json={"instances": X.tolist()})
        assert r.status_code == 200, r.text
        preds = r.json()["predictions"]
        r = http.post("/v1/models/lab/feedback", json={"events": [
            {"event_id": p["event_id"], "click": p["label"] == int(label)}
            for p, label in zip(preds, y, strict=True)]})
        assert r.status_code == 202, r.text
        truth.update((p["event_id"], int(label)) for p, label in zip(preds, y, strict=True))
    assert http.post("/v1/models/lab/sync", params={"timeout": 60}).status_code == 200
    return truth


def export(service: Service, key: str, out: Path, *args: str) -> int:  # noqa: F811
    return main(["log", "export", "--url", service.url, "--key", key, "--model", "lab",
                 "--out", str(out), "--no-progress", *args])


def evaluate(capsys: pytest.CaptureFixture[str], log: Path, policy: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["evaluate", "--no-progress", "--log", str(log), "--format", "noisyloop",
                 "--policy", policy, "--bootstrap", "100"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    return result


def test_export_pages_jsonl_and_parquet_and_says_when_pyarrow_is_missing(
        service: Service, api_key: str, http: httpx.Client, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    feed_label_model(http, 500)
    served = http.get("/v1/models/lab/log", params={"limit": 10_000}).content
    monkeypatch.setattr(calls, "LOG_PAGE", 37)  # 14 pages
    out = tmp_path / "log.jsonl"
    assert export(service, api_key, out) == 0
    assert out.read_bytes() == served and served.count(b"\n") == 500
    pq = pytest.importorskip("pyarrow.parquet")
    assert export(service, api_key, tmp_path / "log.parquet", "--format", "parquet") == 0
    table = pq.read_table(tmp_path / "log.parquet")
    lines = [json.loads(line) for line in served.splitlines()]
    assert table.column("event_id").to_pylist() == [line["event_id"] for line in lines]
    assert table.column("propensity").to_pylist() == [line["propensity"] for line in lines]
    # a time filter reaches the service; an unknown model is the service's 404
    assert export(service, api_key, tmp_path / "none.jsonl", "--since", "9999-01-01") == 0
    assert (tmp_path / "none.jsonl").read_bytes() == b""
    capsys.readouterr()
    assert main(["log", "export", "--url", service.url, "--key", api_key, "--model", "nope",
                 "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    assert "HTTP 404" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert export(service, api_key, tmp_path / "x.parquet", "--format", "parquet") == 2
    assert "pip install 'noisyloop[parquet]'" in capsys.readouterr().err


def test_evaluate_a_models_policy_on_its_exported_log_holds_the_known_value(
        service: Service, api_key: str, http: httpx.Client, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    truth = feed_label_model(http, 4000)
    out = tmp_path / "log.jsonl"
    assert export(service, api_key, out) == 0
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(http.get("/v1/models/lab/snapshot").text)
    # the known values: the simulator's true labels under each policy's probabilities
    read = read_label_log(out, N_CLASSES)
    labels = np.array([truth[json.loads(line)["event_id"]]
                       for line in out.read_text().splitlines()])
    pi = learner_policy(read.log, snapshot_learner(snapshot)[0])
    known_model = float(pi[np.arange(len(labels)), labels].mean())
    assert known_model > 0.6  # it learned: far from the uniform policy's 1/3
    for policy, known in ((f"model:{snapshot}", known_model), ("uniform", 1 / N_CLASSES)):
        result = evaluate(capsys, out, policy)
        assert result["n"] == 4000
        for name in ("ips", "snips", "dr"):
            estimate = result[name]
            assert estimate["ci_low"] <= known <= estimate["ci_high"], (policy, name, known)
            assert abs(estimate["value"] - known) < 0.05, (policy, name, known)


def test_evaluate_a_rank_log_per_ranking_as_the_service_does(
        service: Service, api_key: str, http: httpx.Client, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str], redis_server: EmbeddedRedis) -> None:
    r = http.post("/v1/models", json={"model_id": "lab", "task": "rank", "n_features": 2,
                                      "n_action_features": 2, "slots": 2, "seed": 0})
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(1)
    requests = [{"features": rng.standard_normal(2).tolist(),
                 "actions": [{"id": f"item-{k}", "features": rng.standard_normal(2).tolist()}
                             for k in range(4)]} for _ in range(300)]
    r = http.post("/v1/models/lab/rank", json={"requests": requests})
    assert r.status_code == 200, r.text
    clicked, events = [], []
    for result in r.json()["results"]:
        chosen = [x["id"] for x in result["ranking"] if rng.random() < 0.4]
        clicked.append([x["id"] in chosen for x in result["ranking"]])
        events.append({"event_id": result["event_id"], "clicks": chosen})
    r = http.post("/v1/models/lab/feedback", json={"events": events})
    assert r.status_code == 202 and r.json()["accepted"] == 300, r.text
    assert http.post("/v1/models/lab/sync", params={"timeout": 60}).status_code == 200
    out = tmp_path / "rank.jsonl"
    assert export(service, api_key, out) == 0
    result = evaluate(capsys, out, "logging")
    assert result["n"] == 300 and result["slot_impressions"] == 600  # rankings, slots shown
    clicks = np.array(clicked, dtype=float)
    for position in result["positions"]:
        k = position["position"]
        assert position["ips"]["value"] == pytest.approx(clicks[:, k].mean())
    # the service's evaluation of the same log is the same code: the same numbers
    uniform = evaluate(capsys, out, "uniform")
    r = http.post("/v1/models/lab/evaluations", json={"policy": "uniform", "bootstrap": 100})
    assert r.status_code == 202, r.text
    assert run_jobs(redis_server.url) >= 1  # a worker's jobs role runs it (and any queued)
    job = http.get(f"/v1/models/lab/evaluations/{r.json()['job_id']}").json()
    assert job["status"] == "done", job
    for field in ("ips", "snips", "dr", "n", "slot_impressions", "ess", "positions", "slates"):
        assert job[field] == uniform[field], field
    capsys.readouterr()
    assert main(["evaluate", "--log", str(out), "--format", "noisyloop", "--policy",
                 "fixed:1"]) == 2
    assert "a rank log is evaluated for the policies uniform, logging, not 'fixed:1'" in \
        capsys.readouterr().err


def test_export_reads_streamed_pages_cut_by_bytes_whole(
        service: Service, api_key: str, http: httpx.Client, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages the service streams (past BUFFERED_PAGE_BYTES, 0 here) and ends at its byte
    bound (20,000 bytes: about 60 of the 10,000 lines the client asks for) export every
    line once, in order, as JSON Lines and as Parquet: the client is unchanged."""
    feed_label_model(http, 500)
    served = http.get("/v1/models/lab/log", params={"limit": 10_000}).content
    assert served.count(b"\n") == 500
    monkeypatch.setattr(decisionlog, "BUFFERED_PAGE_BYTES", 0)
    monkeypatch.setattr(decisionlog, "MAX_PAGE_BYTES", 20_000)
    page = http.get("/v1/models/lab/log", params={"limit": 10_000})
    assert "content-length" not in page.headers and 0 < len(page.content) <= 20_000
    assert page.headers["x-next-after"]  # the byte bound cut it
    out = tmp_path / "log.jsonl"
    assert export(service, api_key, out) == 0
    assert out.read_bytes() == served
    pq = pytest.importorskip("pyarrow.parquet")
    assert export(service, api_key, tmp_path / "log.parquet", "--format", "parquet") == 0
    lines = [json.loads(line) for line in served.splitlines()]
    assert pq.read_table(tmp_path / "log.parquet").column("event_id").to_pylist() == [
        line["event_id"] for line in lines]
