"""Faults against real processes: Redis killed and restarted (AOF) under traffic, an API
replica killed mid-request, a slow Redis (``DEBUG SLEEP``).

The worker killed mid-batch is H5's ``tests/workers/test_processes.py::
test_two_workers_one_killed_apply_every_event_exactly_once``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from app.store.embedded import EmbeddedRedis, free_port
from tests.api.conftest import make_client
from tests.reliability.conftest import ADMIN_TOKEN, setup_model, setup_tenant

QUICK = {"redis_socket_timeout": 0.5, "redis_connect_timeout": 0.5}
#: Longest acceptable answer while Redis is down or asleep (timeouts are 0.5 s).
OUTAGE_ANSWER_SECONDS = 1.5


def play_round(client: Any, auth: dict[str, str], n: int = 20) -> tuple[list[str], int]:
    """Predict ``n`` decisions and post their feedback: (event ids, feedback accepted)."""
    r = client.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0.5]] * n},
                    headers=auth)
    if r.status_code != 200:
        return [], 0
    ids = [p["event_id"] for p in r.json()["predictions"]]
    r = client.post("/v1/models/m1/feedback",
                    json={"events": [{"event_id": e, "click": True} for e in ids]}, headers=auth)
    return ids, (r.json()["accepted"] if r.status_code == 202 else 0)


@pytest.mark.slow
def test_redis_killed_and_restarted_with_aof_loses_no_accepted_feedback(
        tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis").start()  # appendonly yes, everysec
    try:
        with make_client(server.url, **QUICK) as api:
            auth = setup_tenant(api)
            setup_model(api, auth, "m1")
            accepted = 0
            for _ in range(5):
                accepted += play_round(api, auth)[1]
            # decisions logged before the crash get their feedback after the restart
            waiting = [p["event_id"] for p in api.post(
                "/v1/models/m1/predict", json={"instances": [[0, 1, 0, 0]] * 10},
                headers=auth).json()["predictions"]]
            assert server.process is not None
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(10)
            outage = []
            for _ in range(5):
                start = time.monotonic()
                r = api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                             headers=auth)
                outage.append((r.status_code, time.monotonic() - start))
                assert r.status_code == 503 and r.headers["Retry-After"].isdigit(), r.text
                assert r.json()["error"]["code"] == "store_unavailable"
            assert max(t for _, t in outage) < OUTAGE_ANSWER_SECONDS, outage
            server.start()  # same port, same AOF
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:  # recovers by itself
                ids, n = play_round(api, auth)
                accepted += n
                if ids:
                    break
                time.sleep(0.1)
            assert ids, "the API did not recover after Redis came back"
            r = api.post("/v1/models/m1/feedback",
                         json={"events": [{"event_id": e, "click": False} for e in waiting]},
                         headers=auth)
            assert r.status_code == 202 and r.json()["accepted"] == len(waiting), r.text
            accepted += len(waiting)
            for _ in range(3):
                accepted += play_round(api, auth)[1]
            r = api.post("/v1/models/m1/sync", params={"timeout": 30}, headers=auth)
            assert r.status_code == 200, r.text
            stats = api.get("/v1/models/m1", headers=auth).json()["stats"]
            assert stats["feedback_accepted"] == accepted
            assert stats["events_applied"] == accepted
            print(f"redis kill: {accepted} feedback accepted and applied, outage answers "
                  f"{max(t for _, t in outage):.3f} s max")
    finally:
        server.stop()


def start_api(redis_url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN, "NOISYLOOP_LOG_LEVEL": "WARNING",
           "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_REDIS_SOCKET_TIMEOUT": "0.5",
           "NOISYLOOP_REDIS_CONNECT_TIMEOUT": "0.5"}
    return subprocess.Popen([sys.executable, "-m", "app.cli", "api", "--redis-url", redis_url,
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the API process exited"
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.slow
def test_api_replica_killed_mid_request_no_accepted_feedback_lost(
        redis_url: str, procs: list[subprocess.Popen[bytes]]) -> None:
    ports = [free_port(), free_port()]
    procs += [start_api(redis_url, p) for p in ports]
    procs.append(subprocess.Popen([sys.executable, "-m", "app.cli", "worker", "--redis-url",
                                   redis_url, "--worker-id", "w", "--roles", "trainer"],
                                  env={**os.environ, "NOISYLOOP_LOG_LEVEL": "WARNING"}))
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    for url, proc in zip(urls, procs, strict=False):
        wait_ready(url, proc)
    victim, survivor = (httpx.Client(base_url=u, timeout=10) for u in urls)
    auth = setup_tenant(survivor)
    setup_model(survivor, auth, "m1")
    lock = threading.Lock()
    settled: dict[str, int] = {}  # event id -> status that settled it (202 or 409 on retry)

    def send(batch: list[str]) -> None:
        body = {"events": [{"event_id": e, "click": True} for e in batch]}
        try:
            r = victim.post("/v1/models/m1/feedback", json=body, headers=auth)
            outcome = {e: 202 for e in batch} if r.status_code == 202 and \
                r.json()["accepted"] == len(batch) else None
        except httpx.HTTPError:
            outcome = None
        if outcome is None:  # the replica died mid-request: the client retries on the other
            r = survivor.post("/v1/models/m1/feedback", json=body, headers=auth)
            assert r.status_code == 202, r.text
            rejected = {x["index"]: x["error"]["code"] for x in r.json()["rejected"]}
            assert set(rejected.values()) <= {"duplicate_feedback"}, rejected
            outcome = {e: 409 if i in rejected else 202 for i, e in enumerate(batch)}
        with lock:
            settled.update(outcome)

    batches = []
    for _ in range(40):
        r = survivor.post("/v1/models/m1/predict", json={"instances": [[1, 0, 0, 0]] * 50},
                          headers=auth)
        batches.append([p["event_id"] for p in r.json()["predictions"]])
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(send, b) for b in batches]
        time.sleep(0.05)  # requests in flight on the victim
        procs[0].send_signal(signal.SIGKILL)
        for f in futures:
            f.result()
    assert procs[0].wait(10) == -signal.SIGKILL
    assert len(settled) == 40 * 50
    r = survivor.post("/v1/models/m1/sync", params={"timeout": 60}, headers=auth)
    assert r.status_code == 200, r.text
    stats = survivor.get("/v1/models/m1", headers=auth).json()["stats"]
    assert stats["feedback_accepted"] == stats["events_applied"] == 40 * 50
    print("replica kill: settled on retry:",
          sum(1 for s in settled.values() if s == 409), "duplicates,",
          sum(1 for s in settled.values() if s == 202), "accepted")


@pytest.mark.slow
def test_slow_redis_bounded_503_and_no_backlog(redis_url: str) -> None:
    with make_client(redis_url, trainer=False, **QUICK) as api:
        auth = setup_tenant(api)
        setup_model(api, auth, "m1")
        sleeper = threading.Thread(target=lambda: redis.Redis.from_url(redis_url).execute_command(
            "DEBUG", "SLEEP", "2"))
        sleeper.start()
        time.sleep(0.1)

        def timed(_: int) -> tuple[int, float]:
            start = time.monotonic()
            r = api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                         headers=auth)
            return r.status_code, time.monotonic() - start

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(timed, range(48)))
        sleeper.join()
        codes = {c for c, _ in results}
        assert codes <= {200, 503} and 503 in codes, results
        assert max(t for _, t in results) < OUTAGE_ANSWER_SECONDS * 2, results
        print(f"slow redis: {sum(c == 503 for c, _ in results)}/{len(results)} answered 503, "
              f"slowest {max(t for _, t in results):.2f} s")
        # once Redis answers again, the next requests are served at once (nothing queued)
        start = time.monotonic()
        for _ in range(10):
            assert api.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                            headers=auth).status_code == 200
        assert time.monotonic() - start < 2
