"""``noisyloop serve`` as a real process: first-start token; a restart keeps tenants and models."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.store.embedded import free_port

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow


def _start(data_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "NOISYLOOP_LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    env.pop("NOISYLOOP_REDIS_URL", None)
    env.pop("NOISYLOOP_ADMIN_TOKEN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--data-dir",
         str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def _wait_ready(base: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve exited early"
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not become ready")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return out


def _assert_private(data_dir: Path) -> None:
    """The data directory and the embedded Redis's are closed to other users, and that Redis
    is reached through its socket there (no TCP port)."""
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / "redis").stat().st_mode) == 0o700
    for path in data_dir.iterdir():
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    url = (data_dir / "redis.url").read_text().strip()
    assert url == f"unix://{data_dir.resolve() / 'redis' / 'redis.sock'}?db=0"


def test_serve_restart_keeps_tenants_models_and_weights(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(data_dir, port)
    try:
        _wait_ready(base, proc)
        _assert_private(data_dir)
        token = (data_dir / "admin_token").read_text().strip()
        admin = {"Authorization": f"Bearer {token}"}
        key = httpx.post(f"{base}/v1/admin/tenants", json={"tenant_id": "acme"},
                         headers=admin).json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        r = httpx.post(f"{base}/v1/models", headers=auth, json={
            "model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 3,
            "n_classes": 3, "seed": 1})
        assert r.status_code == 201
        preds = httpx.post(f"{base}/v1/models/m1/predict", headers=auth,
                           json={"instances": [[1, 0, 0], [0, 1, 0]]}).json()["predictions"]
        events = [{"event_id": p["event_id"], "click": True} for p in preds]
        assert httpx.post(f"{base}/v1/models/m1/feedback", headers=auth,
                          json={"events": events}).json()["accepted"] == 2
        assert httpx.post(f"{base}/v1/models/m1/sync", headers=auth).status_code == 200
        before = httpx.get(f"{base}/v1/models/m1/snapshot", headers=auth).json()
    finally:
        out = _stop(proc)
    assert token in out and "curl" in out  # printed once on first start
    assert not (data_dir / "redis.url").exists()

    proc = _start(data_dir, port)
    try:
        _wait_ready(base, proc)
        tenants = httpx.get(f"{base}/v1/admin/tenants", headers=admin).json()["tenants"]
        assert [t["tenant_id"] for t in tenants] == ["acme"]
        after = httpx.get(f"{base}/v1/models/m1/snapshot", headers=auth).json()
        assert after["version"] == before["version"] == 2
        assert after["state"] == before["state"]
        model = httpx.get(f"{base}/v1/models/m1", headers=auth).json()
        assert model["stats"]["events_applied"] == 2
    finally:
        out = _stop(proc)
    assert token not in out  # not printed again
