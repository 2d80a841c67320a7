"""Soak test: bounded mixed load against real processes with periodic worker kills.

Starts an embedded Redis (AOF), one ``noisyloop api`` process and two
``noisyloop worker`` processes (trainer + sweeper), then for ``--minutes``
runs ``--threads`` clients that each predict a batch of decisions and post
feedback for most of them (the rest expire into no-click events through the
sweeper), at most ``--rps`` requests per second in total.  Every
``--kill-every`` seconds one worker is SIGKILLed and replaced.

At the end it waits for the sweeper and the trainers, then checks:

- the feedback the clients saw accepted (202) equals the model's
  ``feedback_accepted``, and ``events_applied == feedback_accepted +
  events_expired`` (nothing lost, nothing applied twice);
- the API process' resident memory stayed flat: the median RSS of the last
  third of the run within ``--max-growth`` of the median of the second third
  (the first third is warm-up).

Usage::

    .venv/bin/python bench/soak.py --minutes 2 --json soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from app.store.embedded import EmbeddedRedis, free_port

ADMIN_TOKEN = "soak-admin-token-0123456789abcdefgh"
N_FEATURES, N_CLASSES, BATCH, WAIT_SECONDS = 20, 5, 20, 3
ENV = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN, "NOISYLOOP_LOG_LEVEL": "WARNING",
       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], env=ENV,
                            stdout=subprocess.DEVNULL)


def start_worker(redis_url: str, worker_id: str) -> subprocess.Popen[bytes]:
    return start("worker", "--redis-url", redis_url, "--worker-id", worker_id, "--roles",
                 "trainer,sweeper", "--lease-ttl", "2", "--heartbeat-ttl", "3",
                 "--poll-interval", "0.2")


class Load:
    """Client threads: predict a batch, post feedback for ~90% of it, count 202s."""

    def __init__(self, url: str, auth: dict[str, str], threads: int, rps: float) -> None:
        self.url, self.auth, self.threads = url, auth, threads
        self.interval = threads / rps  # seconds between requests of one thread
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"requests": 0, "predictions": 0, "feedback_accepted": 0,
                       "unanswered": 0, "errors": 0}

    def add(self, **kw: int) -> None:
        with self.lock:
            for k, v in kw.items():
                self.counts[k] += v

    def run_one(self, seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.stop.is_set():
                t0 = time.monotonic()
                X = [[rng.gauss(0, 1) for _ in range(N_FEATURES)] for _ in range(BATCH)]
                try:
                    r = client.post("/v1/models/soak/predict", json={"instances": X},
                                    headers=self.auth)
                    self.add(requests=1)
                    if r.status_code != 200:
                        self.add(errors=1)
                        continue
                    ids = [p["event_id"] for p in r.json()["predictions"]]
                    keep = [e for e in ids if rng.random() < 0.9]
                    self.add(predictions=len(ids), unanswered=len(ids) - len(keep))
                    time.sleep(max(0.0, self.interval - (time.monotonic() - t0)))
                    t0 = time.monotonic()
                    body = {"events": [{"event_id": e, "click": rng.random() < 0.3}
                                       for e in keep]}
                    r = client.post("/v1/models/soak/feedback", json=body, headers=self.auth)
                    self.add(requests=1)
                    if r.status_code == 202:
                        self.add(feedback_accepted=r.json()["accepted"])
                    else:
                        self.add(errors=1)
                except httpx.HTTPError:
                    self.add(errors=1)
                time.sleep(max(0.0, self.interval - (time.monotonic() - t0)))

    def start(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self.run_one, args=(i,), daemon=True)
                   for i in range(self.threads)]
        for t in threads:
            t.start()
        return threads


def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not become ready")


def soak(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="noisyloop-soak-"))
    server = EmbeddedRedis(data / "redis").start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = start("api", "--redis-url", server.url, "--port", str(port))
    workers = [start_worker(server.url, f"soak-w{i}") for i in range(2)]
    kills = 0
    rss: list[tuple[float, int]] = []
    try:
        wait_ready(url)
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        key = httpx.post(f"{url}/v1/admin/tenants", json={"tenant_id": "soak"},
                         headers=admin).json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        r = httpx.post(f"{url}/v1/models", headers=auth, json={
            "model_id": "soak", "task": "label", "algorithm": "rcnbf", "n_features": N_FEATURES,
            "n_classes": N_CLASSES, "params": {"rho0": 0.1, "rho1": 0.1},
            "feedback": {"wait_seconds": WAIT_SECONDS, "on_timeout": "no_click"}})
        r.raise_for_status()
        load = Load(url, auth, args.threads, args.rps)
        threads = load.start()
        api_proc = psutil.Process(api.pid)
        started = time.monotonic()
        end = started + args.minutes * 60
        next_kill = started + args.kill_every
        while time.monotonic() < end:
            time.sleep(1)
            rss.append((time.monotonic() - started, api_proc.memory_info().rss))
            if time.monotonic() >= next_kill:
                i = kills % len(workers)
                workers[i].send_signal(signal.SIGKILL)
                workers[i].wait(10)
                workers[i] = start_worker(server.url, f"soak-w{i}-{kills}")
                kills += 1
                next_kill += args.kill_every
        load.stop.set()
        for t in threads:
            t.join(60)
        time.sleep(WAIT_SECONDS + 3)  # the sweeper expires the unanswered decisions
        r = httpx.post(f"{url}/v1/models/soak/sync", params={"timeout": 120}, headers=auth,
                       timeout=130)
        r.raise_for_status()
        stats = httpx.get(f"{url}/v1/models/soak", headers=auth).json()["stats"]
    finally:
        for p in [api, *workers]:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        server.stop()
    values = [v for _, v in rss]
    third = max(len(values) // 3, 1)
    mid, last = statistics.median(values[third:2 * third] or values), \
        statistics.median(values[-third:])
    growth = (last - mid) / mid
    return {
        "minutes": args.minutes, "threads": args.threads, "target_rps": args.rps,
        "worker_kills": kills, "client": load.counts, "model_stats": stats,
        "accepted_match": load.counts["feedback_accepted"] == stats["feedback_accepted"],
        "applied_match": stats["events_applied"] == stats["feedback_accepted"]
        + stats["events_expired"],
        "api_rss_mb": {"start": round(values[0] / 2**20, 1), "mid_median": round(mid / 2**20, 1),
                       "last_median": round(last / 2**20, 1), "max": round(max(values) / 2**20, 1)},
        "rss_growth": round(growth, 4), "rss_flat": growth <= args.max_growth,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rps", type=float, default=40.0, help="total requests per second")
    parser.add_argument("--kill-every", type=float, default=20.0, help="seconds between kills")
    parser.add_argument("--max-growth", type=float, default=0.10,
                        help="largest accepted relative RSS growth (last vs middle third)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    result = soak(args)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", "utf-8")
    ok = result["accepted_match"] and result["applied_match"] and result["rss_flat"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
