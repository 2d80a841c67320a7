"""``noisyloop serve`` as a real process at its defaults (every role it runs): the end of a
short burst is kept as a version once the model goes idle, long before the version interval
(60 s) is up; stopping serve stops every process it started."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from app.store.embedded import free_port
from tests import processes
from tests.commands.test_serve import _start, _stop, _tenant_with_model, _wait_ready
from workers.versions import IDLE_SECONDS

pytestmark = pytest.mark.slow

#: Events of the burst (3 batches of 1,000), as the new user sent them.
EVENTS = 3000
#: Longest wait for the burst's version to be listed: idle after IDLE_SECONDS, then kept on
#: the next trainer pass (at most idle_interval, 0.5 s, later); the rest is room for a busy
#: machine, and the whole wait stays well under the 60 s interval that kept it before.
LISTED_WITHIN = IDLE_SECONDS + 15.0


def test_burst_kept_when_the_model_goes_idle_under_serve(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start(data_dir, port)
    children: set[int] = set()
    try:
        _wait_ready(base, proc)
        children = processes.descendants(proc.pid)
        assert children  # the embedded redis-server at least
        _, auth = _tenant_with_model(base, data_dir, "rcnbf")
        versions = httpx.get(f"{base}/v1/models/m1/versions", headers=auth).json()
        assert [v["reason"] for v in versions["versions"]] == ["create"]
        for start in range(0, EVENTS, 1000):
            preds = httpx.post(f"{base}/v1/models/m1/predict", headers=auth, json={
                "instances": [[1, 0, (start + i) % 7 / 7] for i in range(1000)]},
                timeout=30).json()["predictions"]
            events = [{"event_id": p["event_id"], "click": i % 3 == 0}
                      for i, p in enumerate(preds)]
            assert httpx.post(f"{base}/v1/models/m1/feedback", headers=auth, timeout=30,
                              json={"events": events}).json()["accepted"] == 1000
        assert httpx.post(f"{base}/v1/models/m1/sync", headers=auth,
                          timeout=30).status_code == 200
        synced = time.monotonic()
        current = httpx.get(f"{base}/v1/models/m1/versions", headers=auth).json()["version"]
        assert current > 1
        kept: list[tuple[int, str]] = []
        while time.monotonic() - synced < LISTED_WITHIN:
            listed = httpx.get(f"{base}/v1/models/m1/versions", headers=auth).json()
            kept = [(v["version"], v["reason"]) for v in listed["versions"]]
            if (current, "trainer") in kept:
                break
            time.sleep(0.5)
        waited = time.monotonic() - synced
        assert (current, "trainer") in kept, (current, kept, waited)
        assert listed["version"] == current  # nothing learned meanwhile: the version in force
    finally:
        _stop(proc)
    assert proc.returncode == 0
    assert processes.wait_gone(children, 10) == set()
    assert processes.descendants(proc.pid) == set()
