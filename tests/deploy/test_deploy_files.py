"""The deployment files parse, and Prometheus's own tool accepts its files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")


def test_parse_yaml_files_all_valid() -> None:
    files = [ROOT / "docker-compose.yml", *DEPLOY.rglob("*.yml"), *DEPLOY.rglob("*.yaml")]
    assert len(files) >= 8
    for path in files:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert docs and all(isinstance(d, dict) for d in docs), path


def test_compose_stack_has_every_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert "NOISYLOOP_METRICS_TOKEN" in compose["x-noisyloop-env"]
    assert {"source": "metrics_token", "target": "/etc/prometheus/metrics_token"} in \
        services["prometheus"]["secrets"]
    assert {"redis", "api", "worker", "prometheus", "grafana"} <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    assert services["api"]["deploy"]["replicas"] == 2


def test_k8s_manifests_have_probes_and_hpa() -> None:
    kinds: dict[str, dict] = {}
    for path in (DEPLOY / "k8s").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            kinds[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    api = kinds["Deployment/noisyloop-api"]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "HorizontalPodAutoscaler/noisyloop-api" in kinds
    assert "Secret/noisyloop-secrets" in kinds
    assert "Deployment/noisyloop-worker" in kinds


def test_dashboard_queries_every_panel() -> None:
    dash = json.loads((DEPLOY / "grafana/dashboards/noisyloop.json").read_text())
    assert dash["uid"] == "noisyloop"
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) == len(dash["panels"]) >= 8
    assert all("noisyloop_" in e for e in exprs)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/run installs it)")
def test_promtool_accepts_config_and_rules(tmp_path: Path) -> None:
    """The files parse, the scrape config's credential file is where it says (beside it, as
    docker-compose.yml mounts the metrics token), and the alerts' unit tests
    (alerts_test.yml: a 30 % fall of a model's calibrated reward fires
    NoisyloopCalibratedRewardDrop, a 10 % one does not) pass."""
    shutil.copytree(DEPLOY / "prometheus", tmp_path, dirs_exist_ok=True)
    (tmp_path / "metrics_token").write_text("a-metrics-token-for-promtool-0123456789\n")
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "alerts.yml"],
                 ["test", "rules", "alerts_test.yml"]):
        result = subprocess.run([PROMTOOL, *args], cwd=tmp_path, check=False,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
