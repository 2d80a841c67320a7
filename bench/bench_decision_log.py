"""CPU cost of the decision log per feedback event, and its memory per event in Redis.

Each run starts an embedded redis-server (AOF on, as in production) and
``noisyloop serve --redis-url`` on it (the code of the current directory,
with its in-process trainer), creates a ``label`` / ``rcnbf`` model (d = 64,
K = 10), predicts ``N`` batches of 1000, then posts their feedback in
1000-event batches and waits until every event is applied (``sync``).  The
CPU time of the serve process and of redis-server over the feedback phase
(the API's join plus the trainer's updates and publishes, where the log is
written) is the cost.  Runs alternate the log off
(``NOISYLOOP_WORKER_LOG_MAX_EVENTS=0``) and on (the default retention), so
both see the same machine; the medians are compared.

Memory: on the last "on" run, ``MEMORY USAGE`` of the log stream and its
index (all samples) divided by the events logged, for that model and for a label model with
20 features (K = 10) and a rank model ranking 20 candidates of 20 features
into 5 slots (20 context features), each with ``N`` x 1000 events; and of each
model's id table (rank: the 20 candidate ids).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_decision_log.py 20 3 \\
        --json bench/results/decision-log.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from noisyloop_client import Client

from app.bench.machine import linux_process_cpu_seconds, machine_info
from app.bench.results import write_results
from app.store.decisionlog import LOGGED_FIELD
from app.store.embedded import EmbeddedRedis, free_port
from app.store.keys import ModelKeys


def start_serve(redis_url: str, log_on: bool) -> tuple[subprocess.Popen[bytes], str, str]:
    """``noisyloop serve`` on ``redis_url``; returns the process, its URL and an API key."""
    port, token = free_port(), "bench-token-" + os.urandom(12).hex()
    env = {**os.environ, "NOISYLOOP_ADMIN_TOKEN": token, "OPENBLAS_NUM_THREADS": "1",
           "NOISYLOOP_LOG_LEVEL": "WARNING"}
    if not log_on:
        env["NOISYLOOP_WORKER_LOG_MAX_EVENTS"] = "0"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--redis-url", redis_url], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with Client(url, admin_token=token) as admin:
                return proc, url, admin.create_tenant("bench")["api_key"]
        except Exception:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("serve did not start")


def label_events(c: Client, model: str, d: int, n: int) -> None:
    """Create a label model, predict ``n`` batches of 1000, post and apply their feedback."""
    c.create_model(model, "label", d, algorithm="rcnbf", n_classes=10, seed=0)
    X = np.random.default_rng(0).random((1000, d))
    ids = [str(p["event_id"]) for _ in range(n) for p in c.predict_batch(model, X)]
    for i in range(0, len(ids), 1000):
        c.feedback_batch(model, [{"event_id": e, "click": j % 3 == 0}
                                 for j, e in enumerate(ids[i:i + 1000])])
    c.sync(model, timeout=300)


def rank_events(c: Client, model: str, n: int) -> None:
    """A rank model: ``n`` x 1000 rankings of 20 candidates (d = 20) into 5 slots, a click
    on the first slot of every third."""
    c.create_model(model, "rank", 20, n_action_features=20, slots=5, seed=0)
    rng = np.random.default_rng(0)
    actions = [{"id": f"item-{k}", "features": rng.random(20).tolist()} for k in range(20)]
    for _ in range(n):
        requests = [{"features": rng.random(20).tolist(), "actions": actions}
                    for _ in range(1000)]
        results = []
        for i in range(0, 1000, 100):
            results += c.rank_batch(model, requests[i:i + 100])
        c.feedback_batch(model, [{"event_id": r["event_id"],
                                  "clicks": [r["ranking"][0]["id"]] if j % 3 == 0 else []}
                                 for j, r in enumerate(results)])
    c.sync(model, timeout=300)


def log_bytes_per_event(r: redis.Redis, model: str) -> dict[str, float]:
    mk = ModelKeys("bench", model)
    n = int(r.hget(mk.stats, LOGGED_FIELD) or 0)
    used = int(r.memory_usage(mk.log, samples=0) or 0) + \
        int(r.memory_usage(mk.log_index, samples=0) or 0)
    return {"events": n, "bytes": used, "bytes_per_event": round(used / max(n, 1), 1),
            "id_table_bytes": int(r.memory_usage(mk.item_ids, samples=0) or 0)}


def one_run(n: int, log_on: bool, memory: bool) -> dict[str, Any]:
    """One serve + Redis: CPU ms per 1000 feedback events (serve and redis-server)."""
    with tempfile.TemporaryDirectory() as data:
        server = EmbeddedRedis(Path(data), appendonly=True).start()
        proc, url, key = start_serve(server.url, log_on)
        try:
            with Client(url, key) as c:
                c.create_model("m", "label", 64, algorithm="rcnbf", n_classes=10, seed=0)
                X = np.random.default_rng(0).random((1000, 64))
                ids = [str(p["event_id"]) for _ in range(n) for p in c.predict_batch("m", X)]
                batches = [[{"event_id": e, "click": j % 3 == 0}
                            for j, e in enumerate(ids[i:i + 1000])]
                           for i in range(0, len(ids), 1000)]
                assert server.process is not None
                pids = (proc.pid, server.process.pid)
                before = [linux_process_cpu_seconds(p) for p in pids]
                t = time.perf_counter()
                for batch in batches:
                    c.feedback_batch("m", batch)
                c.sync("m", timeout=300)
                wall = time.perf_counter() - t
                used = [linux_process_cpu_seconds(p) - b for p, b in zip(pids, before,
                                                                          strict=True)]
                out: dict[str, Any] = {
                    "log": log_on, "events": n * 1000, "wall_s": round(wall, 2),
                    "serve_cpu_ms_per_1000": round(used[0] / n * 1e3, 1),
                    "redis_cpu_ms_per_1000": round(used[1] / n * 1e3, 1),
                    "total_cpu_ms_per_1000": round(sum(used) / n * 1e3, 1)}
                if memory:
                    label_events(c, "l20", 20, n)
                    rank_events(c, "r20", n)
                    with redis.Redis.from_url(server.url) as r:
                        out["memory"] = {name: log_bytes_per_event(r, model) for name, model in
                                         (("label_d64_k10", "m"), ("label_d20_k10", "l20"),
                                          ("rank_20_candidates_5_slots_d20", "r20"))}
                return out
        finally:
            proc.terminate()
            proc.wait(60)
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, help="batches of 1000 events per run")
    parser.add_argument("repeats", type=int, help="runs with the log off and on each")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    runs = []
    for k in range(args.repeats):
        for log_on in (False, True):
            run = one_run(args.n, log_on, memory=log_on and k == args.repeats - 1)
            print(json.dumps(run), flush=True)
            runs.append(run)
    summary = {}
    for log_on in (False, True):
        totals = [r["total_cpu_ms_per_1000"] for r in runs if r["log"] == log_on]
        summary["on" if log_on else "off"] = statistics.median(totals)
    summary["overhead_percent"] = round(100 * (summary["on"] / summary["off"] - 1), 1)
    print(json.dumps(summary))
    if args.json:
        write_results(args.json, {"benchmark": "decision-log", "machine": machine_info(),
                                  "runs": runs, "median_total_cpu_ms_per_1000": summary})


if __name__ == "__main__":
    main()
