"""Prometheus really scrapes noisyloop, and the dashboard and alerts query real series.

The acceptance test runs Prometheus from the system package (Debian's
``prometheus``; ``.ci/run`` installs it) against a running ``noisyloop
serve`` with a one-second scrape interval, and reads a noisyloop series back
through Prometheus's HTTP API.  The name check needs no binary: every
``noisyloop_*`` name in deploy/ must be exported by :class:`app.metrics.Metrics`
(the API's and, through ``workers.worker.Worker``, the workers' registry).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from app.metrics import Metrics
from app.store.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMETHEUS = shutil.which("prometheus")
ADMIN_TOKEN = "prometheus-test-admin-token-0123456789"
METRICS_TOKEN = "prometheus-test-metrics-token-0123456789"
METRIC_NAME = re.compile(r"\bnoisyloop_[a-z0-9_]*[a-z0-9]")
#: Suffixes Prometheus adds to a histogram's samples.
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_names(metrics: Metrics) -> set[str]:
    """Sample names of the registry as Prometheus stores them (histograms by base name)."""
    names = set()
    for family in metrics.registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def used_names() -> dict[str, set[str]]:
    """``noisyloop_*`` names in the alert rules and the dashboard, histogram suffixes removed."""
    alerts = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    texts = {"alerts.yml": [r["expr"] for g in alerts["groups"] for r in g["rules"]]}
    dash = json.loads((DEPLOY / "grafana/dashboards/noisyloop.json").read_text())
    texts["noisyloop.json"] = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    out = {}
    for source, exprs in texts.items():
        names = set()
        for name in METRIC_NAME.findall("\n".join(exprs)):
            for suffix in HISTOGRAM_SUFFIXES:
                name = name.removesuffix(suffix)
            names.add(name)
        out[source] = names
    return out


def test_deploy_queries_only_exported_metrics() -> None:
    exported = exported_names(Metrics())
    used = used_names()
    assert used["alerts.yml"] and used["noisyloop.json"]
    for source, names in used.items():
        assert names <= exported, f"{source} queries unknown series {sorted(names - exported)}"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    """``noisyloop serve`` on a free port with a temporary data dir; yields its base URL."""
    port = free_port()
    env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN,
           "NOISYLOOP_METRICS_TOKEN": METRICS_TOKEN, "NOISYLOOP_LOG_LEVEL": "WARNING"}
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(tmp_path / "data")], env=env,
                            stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _get_ok(f"{base}/readyz"), 60, "noisyloop serve", proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _get_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(check: object, timeout: float, what: str,
          proc: subprocess.Popen[bytes] | None = None) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()  # type: ignore[operator]
        if value:
            return value
        assert proc is None or proc.poll() is None, f"{what} exited early"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None,
                    reason="prometheus binary not installed (.ci/run installs Debian's package)")
def test_prometheus_scrapes_serve_and_answers_a_noisyloop_series(
        serve: str, tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    target = serve.removeprefix("http://")
    (tmp_path / "metrics_token").write_text(METRICS_TOKEN + "\n")
    api_job = next(job for job in yaml.safe_load((DEPLOY / "prometheus/prometheus.yml")
                                                  .read_text())["scrape_configs"]
                   if job["job_name"] == "noisyloop-api")
    config = tmp_path / "prometheus.yml"  # deploy's job, the credential file beside it
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "noisyloop-api", "metrics_path": "/metrics",
                            "authorization": api_job["authorization"],
                            "static_configs": [{"targets": [target]}]}]}))
    assert httpx.get(f"{serve}/metrics").status_code == 401
    prom_port = free_port()
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        r = httpx.post(f"{serve}/v1/admin/tenants", json={"tenant_id": "acme"}, headers=admin)
        assert r.status_code == 201, r.text
        auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
        r = httpx.post(f"{serve}/v1/models", headers=auth, json={
            "model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 3,
            "n_classes": 3, "seed": 1})
        assert r.status_code == 201, r.text
        n_predictions = 0
        for batch in (2, 3, 4):
            r = httpx.post(f"{serve}/v1/models/m1/predict", headers=auth,
                           json={"instances": [[1.0, 0.0, 0.5]] * batch})
            assert r.status_code == 200, r.text
            n_predictions += batch
        api = f"http://127.0.0.1:{prom_port}/api/v1/query"
        query = 'sum(noisyloop_predictions_total{tenant="acme", model="m1"})'

        def scraped() -> float | None:
            try:
                body = httpx.get(api, params={"query": query}, timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return None
            assert body["status"] == "success", body
            result = body["data"]["result"]
            value = float(result[0]["value"][1]) if result else None
            return value if value == n_predictions else None

        assert _wait(scraped, 45, "Prometheus to scrape the predictions", prom) == n_predictions
        up = httpx.get(api, params={"query": 'up{job="noisyloop-api"}'}, timeout=2).json()
        assert [float(s["value"][1]) for s in up["data"]["result"]] == [1.0]
    finally:
        prom.terminate()
        try:
            prom.wait(20)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait(10)
