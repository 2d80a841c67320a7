"""Peak memory of the worker evaluating a 1,000,000-event window of a label model's log.

An embedded Redis and the app (in-process trainer) serve a ``label`` /
``rcnbf`` model (4 features, 3 labels) fed ``--seed-events`` simulated rounds;
the log entries those rounds wrote are then copied (``XADD`` of the same
fields) until the log holds ``--events`` events, an evaluation of the whole
log for ``--policy`` (``uniform`` by default; ``config:JSON`` for a
configuration trained on the first half) is queued, and a worker process of
its own (the ``jobs`` role, drained once, its pool threads so that one
process does all the work) runs it, reporting its peak RSS and CPU time;
the job's ``n`` is checked against the log's events.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_stream_service.py \\
        --json bench/results/stream-service.json
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_stream_service.py \\
        --policy 'config:{"algorithm": "rcnbf"}' \\
        --json bench/results/stream-service-config.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from fastapi.testclient import TestClient

from app.api.context import ApiContext
from app.main import create_app
from app.settings import Settings
from app.store.embedded import EmbeddedRedis
from app.store.keys import ModelKeys
from app.worker_settings import WorkerSettings
from workers.worker import Worker

ADMIN = "bench-admin-token-0123456789abcdef"


async def run_trainer(ctx: ApiContext, stop: asyncio.Event) -> None:
    """The app's in-process trainer."""
    settings = WorkerSettings(roles=("trainer",), worker_id="bench", flush_interval=0.01)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


def drain(url: str) -> None:
    """One drain of a worker's jobs role; prints its peak RSS and CPU time."""
    from app.store import Store

    async def run() -> int:
        store = Store.from_url(url)
        try:
            return await Worker(store, WorkerSettings(  # pool of threads: one process's RSS
                roles=("jobs",), worker_id="bench", nrest_timeout=600,
                nrest_threads=True)).drain()
        finally:
            await store.close()

    started = time.perf_counter()
    jobs = asyncio.run(run())
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"jobs": jobs, "wall_seconds": time.perf_counter() - started,
                      "cpu_seconds": own.ru_utime + own.ru_stime + children.ru_utime
                      + children.ru_stime,
                      "peak_rss_mb": max(own.ru_maxrss, children.ru_maxrss) / 1024}))


def seed_log(client: TestClient, auth: dict[str, str], n: int) -> None:
    """A label model fed ``n`` rounds (click: the played label is argmax of the first 3)."""
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label",
                                        "algorithm": "rcnbf", "n_features": 4,
                                        "n_classes": 3, "seed": 0}, headers=auth)
    assert r.status_code == 201, r.text
    X = np.random.default_rng(0).standard_normal((n, 4))
    for i in range(0, n, 1000):
        r = client.post("/v1/models/m1/predict", json={"instances": X[i:i + 1000].tolist()},
                        headers=auth)
        preds = r.json()["predictions"]
        events = [{"event_id": p["event_id"], "click": p["label"] == int(np.argmax(x[:3]))}
                  for p, x in zip(preds, X[i:i + 1000], strict=True)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=auth).status_code == 202
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200


def grow_log(url: str, tenant: str, events: int) -> int:
    """Copy the log's entries until it holds ``events`` events; returns the events."""
    key = ModelKeys(tenant, "m1").log
    with redis.Redis.from_url(url) as r:
        entries = [fields for _, fields in r.xrange(key) if fields.get(b"k") != b"marker"]
        total = sum(int(f[b"n"]) for f in entries)
        while total < events:
            with r.pipeline(transaction=False) as pipe:
                for fields in entries:
                    pipe.xadd(key, fields)
                    total += int(fields[b"n"])
                pipe.execute()
        return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    parser.add_argument("--seed-events", type=int, default=5_000, help="rounds served")
    parser.add_argument("--policy", default="uniform",
                        help="the policy evaluated: a name, or config:JSON (default uniform)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results")
    parser.add_argument("--drain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drain:
        drain(args.drain)
        return

    from app.bench.machine import machine_info
    from app.bench.results import write_results

    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp)) as server:
        app = create_app(Settings(redis_url=server.url, admin_token=ADMIN),
                         background=[run_trainer])
        with TestClient(app) as client:
            r = client.post("/v1/admin/tenants", json={"tenant_id": "acme"},
                            headers={"Authorization": f"Bearer {ADMIN}"})
            auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
            seed_log(client, auth, args.seed_events)
            total = grow_log(server.url, "acme", args.events)
            kind, _, config = args.policy.partition(":")
            policy = json.loads(config) if kind == "config" else args.policy
            r = client.post("/v1/models/m1/evaluations", json={"policy": policy},
                            headers=auth)
            assert r.status_code == 202, r.text
            job = r.json()["job_id"]
            out = subprocess.run([sys.executable, __file__, "--drain", server.url],
                                 check=True, capture_output=True, text=True)
            run: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
            done = client.get(f"/v1/models/m1/evaluations/{job}", headers=auth).json()
    result = {"events": total, "policy": args.policy, "worker": run, "status": done["status"],
              "n": done.get("n"), "ips": done.get("ips"), "split": done.get("split"),
              "machine": machine_info()}
    print(f"worker evaluating {total:,} events: {done['status']}, n = {done.get('n')}, "
          f"peak RSS {run['peak_rss_mb']:.0f} MB, {run['cpu_seconds']:.1f} s CPU, "
          f"{run['wall_seconds']:.0f} s wall")
    if args.json:
        write_results(args.json, result)


if __name__ == "__main__":
    main()
