"""Service throughput and latency with a load generator in its own process (issue 9).

``run()`` starts ``noisyloop serve`` on a temporary data directory (or uses
``--url`` with an admin token), creates a tenant and a ``label`` / ``rcnbf``
model with digits-sized features (d = 64, K = 10), and runs the load
generator (:func:`load`, in a child process, using :mod:`app.client`):

* single predict, closed loop at several concurrencies: requests/s and
  latency percentiles;
* single predict, open loop at a fixed rate (requests are due on a fixed
  schedule and latency counts from the due time, so a slow answer cannot hide
  the queue it causes: no coordinated omission);
* batch predict, 1000 instances per request: decisions/s;
* batch feedback, 1000 events per request: events/s; then the time until the
  trainer has applied all of them (``POST /sync``) as the trainer lag at the
  end of that burst, and the applied events/s over burst plus drain;
* WebSocket: predict messages/s with many in flight on one socket;
* the same closed loop against a bare FastAPI endpoint with one Redis GET on
  the same Redis (:mod:`app.bench.baseline`), for the ratio.

The load generator shares the machine's cores with the service; its own CPU
cost (httpx, JSON) is part of every figure, baseline included.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from app.bench.machine import machine_info
from app.client import AsyncClient, AsyncStream, Client, NoisyloopError
from app.client.calls import Call

D, K = 64, 10
#: Failures a load phase counts instead of stopping.
SEND_ERRORS = (NoisyloopError, httpx.HTTPError, OSError)
MODEL = "bench-d64"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, path: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.request("GET" if path == "/healthz" else "POST", url + path,
                             timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


@contextmanager
def _process(args: list[str], env: dict[str, str], url: str, path: str
             ) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_healthy(url, path, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _percentiles(lat: list[float]) -> dict[str, float | None]:
    if not lat:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    arr = np.asarray(lat) * 1e3
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3),
            "p99_ms": round(float(p99), 3), "max_ms": round(float(arr.max()), 3)}


async def _closed(send: Any, concurrency: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    end = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < end:
            t = time.perf_counter()
            try:
                await send()
            except SEND_ERRORS:
                errors += 1
                continue
            lat.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"concurrency": concurrency, "requests": len(lat), "errors": errors,
            "per_second": round(len(lat) / elapsed, 1), **_percentiles(lat)}


async def _open(send: Any, rate: float, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    n = int(rate * seconds)
    start = time.perf_counter()

    async def one(due: float) -> None:
        nonlocal errors
        try:
            await send()
        except SEND_ERRORS:
            errors += 1
            return
        lat.append(time.perf_counter() - due)

    tasks = []
    for i in range(n):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(due)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    return {"target_rate": rate, "requests": len(lat), "errors": errors,
            "achieved_per_second": round(len(lat) / elapsed, 1), **_percentiles(lat)}


async def _load(cfg: dict[str, Any]) -> dict[str, Any]:
    url, key, secs = cfg["url"], cfg["api_key"], cfg["seconds"]
    rng = np.random.default_rng(0)
    X = rng.random((1000, D))
    x_list = [row.tolist() for row in X[:64]]
    out: dict[str, Any] = {}
    async with AsyncClient(url, key, max_connections=128) as c:
        i = 0

        async def predict() -> None:
            nonlocal i
            i += 1
            await c.predict(MODEL, x_list[i % 64])

        out["predict_closed"] = [await _closed(predict, conc, secs)
                                 for conc in cfg["concurrencies"]]
        out["predict_open"] = [await _open(predict, rate, secs) for rate in cfg["rates"]]

        async def predict_batch() -> None:
            await c.predict_batch(MODEL, X)

        r = await _closed(predict_batch, 2, secs)
        out["predict_batch"] = {**r, "instances_per_request": 1000,
                                "decisions_per_second": round(r["per_second"] * 1000)}

        ids: list[str] = []
        for _ in range(cfg["feedback_batches"]):
            ids += [p["event_id"] for p in await c.predict_batch(MODEL, X)]
        batches = [[{"event_id": e, "click": bool(j % 3 == 0)} for j, e in
                    enumerate(ids[s:s + 1000])] for s in range(0, len(ids), 1000)]
        before = (await c.get_model(MODEL))["stats"]["events_applied"]
        queue = list(batches)
        lat: list[float] = []
        start = time.perf_counter()

        async def feeder() -> None:
            while queue:
                body = queue.pop()
                t = time.perf_counter()
                await c.feedback_batch(MODEL, body)
                lat.append(time.perf_counter() - t)

        await asyncio.gather(feeder(), feeder())
        burst = time.perf_counter() - start
        await c.sync(MODEL, timeout=120)
        drained = time.perf_counter() - start
        applied = (await c.get_model(MODEL))["stats"]["events_applied"] - before
        out["feedback_batch"] = {
            "events": len(ids), "seconds": round(burst, 3),
            "events_per_second": round(len(ids) / burst), **_percentiles(lat)}
        out["trainer"] = {
            "events_applied": applied, "lag_after_burst_s": round(drained - burst, 3),
            "applied_per_second": round(applied / drained)}

    async with await AsyncStream.connect(url, key, MODEL) as ws:
        j = 0

        async def ws_predict() -> None:
            nonlocal j
            j += 1
            await ws.predict(x_list[j % 64])

        out["websocket_predict"] = await _closed(ws_predict, 64, secs)

    if cfg.get("baseline_url"):
        async with AsyncClient(cfg["baseline_url"], max_connections=128) as b:
            async def get() -> None:
                await b.send(Call("POST", "/get"))

            out["baseline_closed"] = [await _closed(get, conc, secs)
                                      for conc in cfg["concurrencies"]]
    return out


def load(cfg: dict[str, Any]) -> dict[str, Any]:
    """The load generator (run in its own process)."""
    try:
        import uvloop

        return uvloop.run(_load(cfg))
    except ImportError:
        return asyncio.run(_load(cfg))


def _setup(url: str, admin_token: str) -> str:
    with Client(url, admin_token=admin_token) as admin:
        key = admin.create_tenant(f"bench-{os.getpid()}-{int(time.time())}")["api_key"]
    with Client(url, key) as c:
        c.create_model(MODEL, "label", D, algorithm="rcnbf", n_classes=K, seed=0)
    return key


def run(*, quick: bool = False, url: str | None = None, admin_token: str | None = None
        ) -> dict[str, Any]:
    """Run the service benchmark; returns the JSON-ready report."""
    secs = 3.0 if quick else 10.0
    cfg: dict[str, Any] = {"seconds": secs, "concurrencies": [1, 8, 32],
                           "rates": [500.0] if quick else [500.0, 1000.0],
                           "feedback_batches": 30 if quick else 100}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING"}
    with ExitStack() as stack:
        if url is None:
            data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nl-bench-")))
            admin_token = "bench-admin-token-" + os.urandom(12).hex()
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(_process(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                 "--data-dir", str(data)],
                {**env, "NOISYLOOP_ADMIN_TOKEN": admin_token}, url, "/healthz"))
            redis_url = (data / "redis.url").read_text("utf-8").strip()
            bport = _free_port()
            cfg["baseline_url"] = f"http://127.0.0.1:{bport}"
            stack.enter_context(_process(
                [sys.executable, "-m", "app.bench.baseline", "--port", str(bport),
                 "--redis-url", redis_url], env, cfg["baseline_url"], "/get"))
        if admin_token is None:
            raise ValueError("--url needs --admin-token")
        cfg.update(url=url, api_key=_setup(url, admin_token))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            results = pool.apply(load, (cfg,))
    ratio = None
    if "baseline_closed" in results:
        ratio = {str(p["concurrency"]): round(p["per_second"] / b["per_second"], 3)
                 for p, b in zip(results["predict_closed"], results["baseline_closed"],
                                 strict=True)}
    open_1000 = [r for r in results["predict_open"] if r["target_rate"] == 1000.0]
    best_ratio = max(ratio.values()) if ratio else None
    goals = {
        "batch_feedback_20k_events_per_s": results["feedback_batch"]["events_per_second"]
        >= 20_000,
        "batch_predict_20k_decisions_per_s": results["predict_batch"]["decisions_per_second"]
        >= 20_000,
        "single_predict_60pct_of_baseline": None if best_ratio is None else best_ratio >= 0.6,
        "p99_at_1000_per_s_below_20ms": (open_1000[0]["p99_ms"] <= 20.0
                                         if open_1000 and open_1000[0]["p99_ms"] else None),
    }
    cfg.pop("api_key", None)
    return {"benchmark": "service", "machine": machine_info(), "config": cfg,
            "results": results, "ratios": {"predict_over_baseline_by_concurrency": ratio},
            "goals": goals}
