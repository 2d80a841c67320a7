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


def _redis_pid(data_dir: Path) -> int:
    import redis

    url = (data_dir / "redis.url").read_text().strip()
    with redis.Redis.from_url(url) as client:
        return int(client.info("server")["process_id"])


def _tenant_with_model(base: str, data_dir: Path,
                       algorithm: str) -> tuple[dict[str, str], dict[str, str]]:
    """The admin's and a new tenant's headers, the tenant owning a label model ``m1`` of
    ``algorithm`` (3 features, 3 classes)."""
    admin = {"Authorization": f"Bearer {(data_dir / 'admin_token').read_text().strip()}"}
    key = httpx.post(f"{base}/v1/admin/tenants", json={"tenant_id": "acme"},
                     headers=admin).json()["api_key"]
    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.post(f"{base}/v1/models", headers=auth, json={
        "model_id": "m1", "task": "label", "algorithm": algorithm, "n_features": 3,
        "n_classes": 3, "seed": 1}).status_code == 201
    return admin, auth


def test_serve_restarts_its_killed_redis_and_loses_nothing_accepted(tmp_path: Path) -> None:
    """redis-server SIGKILLed under serve: /healthz says so, serve restarts it by itself
    (ready again well within 30 s), counts the restart, and every accepted event is applied;
    stopping serve stops the new redis-server too."""
    from tests import processes

    data_dir, port = tmp_path / "data", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(data_dir, port)
    try:
        _wait_ready(base, proc)
        admin, auth = _tenant_with_model(base, data_dir, "rcnbf")

        def round_of(n: int) -> int:
            preds = httpx.post(f"{base}/v1/models/m1/predict", headers=auth, json={
                "instances": [[1, 0, 0]] * n}).json()["predictions"]
            events = [{"event_id": p["event_id"], "click": True} for p in preds]
            return int(httpx.post(f"{base}/v1/models/m1/feedback", headers=auth,
                                  json={"events": events}).json()["accepted"])

        accepted = round_of(300)
        assert accepted == 300
        killed = _redis_pid(data_dir)
        os.kill(killed, signal.SIGKILL)
        saw_down = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None
            health = httpx.get(f"{base}/healthz", timeout=2)
            if health.status_code == 503:
                assert health.json()["error"]["code"] == "store_down"
                saw_down = True
            elif saw_down and httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("serve did not restart its redis-server within 30 s")
        restarted = _redis_pid(data_dir)
        assert restarted != killed
        accepted += round_of(200)
        assert httpx.post(f"{base}/v1/models/m1/sync", headers=auth,
                          timeout=30).status_code == 200
        stats = httpx.get(f"{base}/v1/models/m1", headers=auth).json()["stats"]
        assert stats["events_applied"] == stats["feedback_accepted"] == accepted == 500
        metrics = httpx.get(f"{base}/metrics", headers=admin).text
        assert "noisyloop_store_restarts_total 1.0" in metrics
    finally:
        _stop(proc)
    assert processes.wait_gone({restarted}, 10) == set()


def test_serve_ctrl_c_stops_cleanly_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) after an estimate
    ran in the worker's process pool: serve exits 0 and nothing prints a traceback."""
    data_dir, port = tmp_path / "data", free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "NOISYLOOP_LOG_LEVEL": "WARNING"}
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL", "NOISYLOOP_ADMIN_TOKEN"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--data-dir",
         str(data_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    try:
        _wait_ready(base, proc)
        _, auth = _tenant_with_model(base, data_dir, "rcine")
        preds = httpx.post(f"{base}/v1/models/m1/predict", headers=auth, json={
            "instances": [[1, 0, 0]] * 200}).json()["predictions"]
        assert httpx.post(f"{base}/v1/models/m1/feedback", headers=auth, json={"events": [
            {"event_id": p["event_id"], "click": True} for p in preds]}).status_code == 202
        assert httpx.post(f"{base}/v1/models/m1/sync", headers=auth).status_code == 200
        r = httpx.post(f"{base}/v1/models/m1/noise/estimate?wait=true", headers=auth,
                       timeout=60)  # fitted in the pool (422: every click the same)
        assert r.status_code in (200, 422), r.text
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
