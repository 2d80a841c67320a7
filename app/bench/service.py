"""Service throughput and latency with a load generator in its own process.

``run()`` starts ``noisyloop serve`` on a temporary data directory (or uses
``--url`` with an admin token), creates a tenant and two ``label`` /
``rcnbf`` models with digits-sized features (d = 64, K = 10), and runs the
load generator (:func:`load`, in a child process):

* single predict, closed loop at several concurrencies: requests/s and
  latency percentiles (:mod:`app.bench.loadgen`);
* single predict, open loop at fixed rates (requests are due on a fixed
  schedule and latency counts from the due time, so a slow answer cannot hide
  the queue it causes: no coordinated omission);
* the same closed and open loops against a bare FastAPI endpoint with one
  Redis GET on the same Redis (:mod:`app.bench.baseline`), each right after
  its noisyloop twin: the ratio, and the latency the machine and the
  generator allow at the same rate;
* batch predict, 1000 instances per request, 2 and then 4 requests in
  flight: decisions/s (:mod:`noisyloop_client`);
* batch feedback, 1000 events per request, with 2 and then 4 senders:
  events/s, then the time the trainer needs to apply all of them (2 in
  flight leave the server partly idle between a request's Python work and
  its Redis step; 4 keep both busy: that is the capacity);
* trainer lag under sustained load: feedback at 10,000 events/s (batches of
  1000 on a fixed schedule) on a second model whose applied count is polled
  every 20 ms; each batch's lag runs from its 202 to the first poll that
  shows it applied (:func:`lag_percentiles`);
* WebSocket: predict messages/s with 64 in flight on one socket.

The load generator shares the machine's cores with the service; its own CPU
cost is part of every figure, baseline included.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import redis.asyncio as aioredis
from noisyloop_client import AsyncClient, AsyncStream, Client, NoisyloopError

from app.bench.loadgen import closed_loop, encode_request, latency_summary, open_loop
from app.bench.machine import cpu_shares, cpu_times, machine_info
from app.store.embedded import free_port
from app.store.util import text

D, K = 64, 10
#: Failures a load phase counts instead of stopping.
SEND_ERRORS = (NoisyloopError, httpx.HTTPError, OSError)
MODEL = "bench-d64"
#: A second model for the steady-rate trainer-lag phase (its applied count is its own).
LAG_MODEL = "bench-lag"
#: Redis stalls its latency monitor logs (ms): a quarter of the p99 goal.
STALL_THRESHOLD_MS = 5


def _wait_healthy(url: str, path: str, proc: subprocess.Popen[bytes], log: Path,
                  timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text("utf-8", "replace")[-2000:]
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.request("GET" if path == "/healthz" else "POST", url + path,
                             timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


@contextmanager
def server_process(args: list[str], env: dict[str, str], url: str, path: str, log: Path
                   ) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server until the block ends, once ``path`` answers; its stderr goes to ``log``
    (a pipe nobody reads would block the server once full)."""
    with log.open("wb") as err:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait_healthy(url, path, proc, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


async def client_closed_loop(send: Any, concurrency: int, seconds: float) -> dict[str, Any]:
    """Closed loop through :mod:`noisyloop_client` (batch and WebSocket phases)."""
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
            "per_second": round(len(lat) / elapsed, 1), **latency_summary(lat)}


def lag_percentiles(acks: Sequence[tuple[float, int]], applied: Sequence[tuple[float, int]]
                    ) -> dict[str, Any]:
    """Trainer lag of each acknowledged feedback batch, from two time series.

    ``acks``: ``(time of the 202, events accepted so far)`` per batch;
    ``applied``: ``(time, events applied so far)`` polled from the model's
    stats.  A batch's lag is the time from its 202 to the first poll that
    shows all of its events applied (so it is exact to one polling interval,
    rounded up).  Batches never seen applied are counted in ``unapplied``.

    >>> lag_percentiles([(0.0, 10), (1.0, 20)], [(0.5, 5), (1.2, 10), (1.5, 20)])["lags_s"]
    [1.2, 0.5]
    """
    times = np.array([t for t, _ in applied])
    counts = np.array([n for _, n in applied])
    lags = []
    for t_ack, accepted in acks:
        seen = np.flatnonzero((counts >= accepted) & (times >= t_ack))
        if len(seen):
            lags.append(round(float(times[seen[0]] - t_ack), 4))
    return {"batches": len(acks), "unapplied": len(acks) - len(lags), "lags_s": lags,
            **{k.replace("_ms", "_s"): None if v is None else round(v / 1e3, 4)
               for k, v in latency_summary(lags).items()}}


async def _feedback_batches(c: AsyncClient, model: str, X: np.ndarray, n_batches: int
                            ) -> list[list[dict[str, Any]]]:
    """Predict ``X`` ``n_batches`` times (logging each decision) and return one feedback
    batch per predict: a click for every third decision."""
    bodies = []
    for _ in range(n_batches):
        ids = [p["event_id"] for p in await c.predict_batch(model, X)]
        bodies.append([{"event_id": e, "click": j % 3 == 0} for j, e in enumerate(ids)])
    return bodies


async def _steady_feedback(c: AsyncClient, model: str, rate: float, seconds: float
                           ) -> dict[str, Any]:
    """Feedback at ``rate`` events/s with lag polling.

    Batches of 1000 are due on a fixed schedule and sent one after the other
    (a batch still in flight at the next one's due time delays it, which
    ``achieved_events_per_second`` shows).
    """
    batch = 1000
    n_batches = max(1, int(rate * seconds / batch))
    bodies = await _feedback_batches(c, model, np.random.default_rng(1).random((batch, D)),
                                     n_batches)
    await c.sync(model, timeout=120)
    base = (await c.get_model(model))["stats"]["events_applied"]
    acks: list[tuple[float, int]] = []
    applied: list[tuple[float, int]] = []
    done = asyncio.Event()

    async def poll() -> None:
        while True:
            n = (await c.get_model(model))["stats"]["events_applied"] - base
            applied.append((time.perf_counter(), n))
            if done.is_set() and acks and n >= acks[-1][1]:
                return
            await asyncio.sleep(0.02)

    async def send(i: int, due: float) -> None:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        result = await c.feedback_batch(model, bodies[i])
        acks.append((time.perf_counter(), result["accepted"]))

    poller = asyncio.create_task(poll())
    start = time.perf_counter()
    for i in range(n_batches):  # one after the other, so the running totals below are exact
        await send(i, start + i * batch / rate)
    sent = time.perf_counter() - start
    totals = np.cumsum([accepted for _, accepted in acks]).tolist()
    acks = [(t, total) for (t, _), total in zip(acks, totals, strict=True)]
    done.set()
    await asyncio.wait_for(poller, 120)
    lag = lag_percentiles(acks, applied)
    lag.pop("lags_s")
    return {"target_events_per_second": rate, "events": n_batches * batch,
            "achieved_events_per_second": round(n_batches * batch / sent), **lag}


async def _feedback_burst(c: AsyncClient, X: np.ndarray, n_batches: int, in_flight: int
                          ) -> dict[str, Any]:
    """``n_batches`` feedback batches of 1000 events sent with ``in_flight`` senders, then the
    time the trainer needs to apply them all (``POST /sync``)."""
    queue = await _feedback_batches(c, MODEL, X, n_batches)
    events = sum(len(body) for body in queue)
    lat: list[float] = []
    start = time.perf_counter()

    async def sender() -> None:
        while queue:
            body = queue.pop()
            t = time.perf_counter()
            await c.feedback_batch(MODEL, body)
            lat.append(time.perf_counter() - t)

    await asyncio.gather(*(sender() for _ in range(in_flight)))
    burst = time.perf_counter() - start
    await c.sync(MODEL, timeout=120)
    drained = time.perf_counter() - start
    return {"in_flight": in_flight, "events": events, "seconds": round(burst, 3),
            "events_per_second": round(events / burst), **latency_summary(lat),
            "trainer_drain_s": round(drained - burst, 3),
            "applied_per_second_over_burst_and_drain": round(events / drained)}


async def with_disturbances(phase: Awaitable[dict[str, Any]],
                            redis: aioredis.Redis | None = None) -> dict[str, Any]:
    """``phase``'s result with what else could have slowed it down.

    ``steal_percent``: the machine's CPU time the host gave to other guests
    meanwhile (None off Linux).  A latency tail on a VM often has no other
    cause; each phase gets its own figure, as the host's share moves within
    minutes.  ``redis_forks``: forks of the service's Redis meanwhile (an
    AOF rewrite or an RDB save; None when the benchmark did not start the
    Redis).  On 2 cores the child that rewrites the AOF takes a core from
    the service for about a second; this count tells which phases had one
    (a tail came with some automatic rewrites, not with forced ones: see
    docs/benchmarks/service.md).  ``redis_child_at_start``: whether such a
    child was already running when the phase began (a rewrite forked in the
    moment between two phases is in neither count, yet takes the core from
    the next one; None as for forks).  ``redis_stalls_ms``: what Redis's latency
    monitor logged meanwhile (event name -> its longest stall in ms, each
    event of :data:`STALL_THRESHOLD_MS` or more: a slow command, an AOF
    write waiting for the disk, a fork, an expiry cycle; None as for forks).
    """
    before = cpu_times()
    forks = await _total_forks(redis)
    child_at_start = await _child_running(redis)
    if redis is not None:
        await redis.latency_reset()
    result = await phase
    shares = cpu_shares(before, cpu_times())
    after = await _total_forks(redis)
    return {**result, "steal_percent": None if shares is None else shares["steal"],
            "redis_forks": None if forks is None or after is None else after - forks,
            "redis_child_at_start": child_at_start,
            "redis_stalls_ms": await _stalls(redis)}


async def _total_forks(redis: aioredis.Redis | None) -> int | None:
    """Forks since the Redis started (INFO stats ``total_forks``)."""
    if redis is None:
        return None
    return int((await redis.info("stats"))["total_forks"])


async def _child_running(redis: aioredis.Redis | None) -> bool | None:
    """Whether Redis has a child at work: an AOF rewrite or an RDB save (INFO persistence)."""
    if redis is None:
        return None
    info = await redis.info("persistence")
    return bool(info["aof_rewrite_in_progress"] or info["rdb_bgsave_in_progress"])


async def _stalls(redis: aioredis.Redis | None) -> dict[str, int] | None:
    """The latency monitor's events since its last reset: name -> longest stall (ms)."""
    if redis is None:
        return None
    return {text(name) or "": int(longest)  # type: ignore[arg-type]  # an integer reply
            for name, _, _, longest in await redis.latency_latest()}


async def _load(cfg: dict[str, Any]) -> dict[str, Any]:
    url, key, secs = cfg["url"], cfg["api_key"], cfg["seconds"]
    rng = np.random.default_rng(0)
    X = rng.random((1000, D))
    path = f"/v1/models/{MODEL}/predict"
    singles = [encode_request(url, path, orjson.dumps({"features": row.tolist()}), key)
               for row in X[:64]]
    base_url = cfg.get("baseline_url")
    get = [encode_request(base_url, "/get", b"")] if base_url else []
    out: dict[str, Any] = {"predict_closed": [], "predict_open": []}
    redis = aioredis.Redis.from_url(cfg["redis_url"]) if cfg.get("redis_url") else None
    if redis is not None:  # the benchmark's own Redis: log its stalls (with_disturbances)
        await redis.config_set("latency-monitor-threshold", STALL_THRESHOLD_MS)
    if base_url:
        out.update(baseline_closed=[], baseline_open=[])
    # each phase right before its baseline twin: the VM's speed drifts over minutes
    for conc in cfg["concurrencies"]:
        out["predict_closed"].append(
            await with_disturbances(closed_loop(url, singles, conc, secs), redis))
        if base_url:
            out["baseline_closed"].append(
                await with_disturbances(closed_loop(base_url, get, conc, secs), redis))
    for rate in cfg["rates"]:
        out["predict_open"].append(
            await with_disturbances(open_loop(url, singles, rate, secs), redis))
        if base_url:
            out["baseline_open"].append(
                await with_disturbances(open_loop(base_url, get, rate, secs), redis))
    async with AsyncClient(url, key, max_connections=128) as c:
        async def predict_batch() -> None:
            await c.predict_batch(MODEL, X)

        out["predict_batch"] = []
        for in_flight in cfg["batch_in_flight"]:
            r = await client_closed_loop(predict_batch, in_flight, secs)
            out["predict_batch"].append({**r, "instances_per_request": 1000,
                                         "decisions_per_second": round(r["per_second"] * 1000)})
        out["feedback_batch"] = [
            await with_disturbances(_feedback_burst(c, X, cfg["feedback_batches"], in_flight),
                                    redis)
            for in_flight in cfg["batch_in_flight"]]
        out["trainer_steady"] = await with_disturbances(
            _steady_feedback(c, LAG_MODEL, cfg["feedback_rate"], cfg["lag_seconds"]), redis)

    async with await AsyncStream.connect(url, key, MODEL) as ws:
        j = 0

        async def ws_predict() -> None:
            nonlocal j
            j += 1
            await ws.predict(X[j % 64].tolist())

        out["websocket_predict"] = await client_closed_loop(ws_predict, 64, secs)
    if redis is not None:
        await redis.aclose()
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
        for model in (MODEL, LAG_MODEL):
            c.create_model(model, "label", D, algorithm="rcnbf", n_classes=K, seed=0)
    return key


def _goal(value: Any, target: str, met: bool | None) -> dict[str, Any]:
    return {"value": value, "target": target, "met": met}


def peak_ratio(results: dict[str, Any]) -> float | None:
    """Peak single-predict requests/s over the baseline's peak, each over the concurrencies.

    Capacity against capacity: the best of the per-concurrency ratios would
    pass on one disturbed baseline measurement (seen: 0.70 at c = 1 while
    the peaks gave 0.27).
    """
    if "baseline_closed" not in results:
        return None
    ours = max(p["per_second"] for p in results["predict_closed"])
    base = max(p["per_second"] for p in results["baseline_closed"])
    return round(ours / base, 3) if base else None


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's service goals, each with the measured value (None: not measured)."""
    ratio = peak_ratio(results)
    at_1000 = [r for r in results["predict_open"] if r["target_rate"] == 1000.0]
    p99 = at_1000[0]["p99_ms"] if at_1000 else None
    kept_up = bool(at_1000) and at_1000[0]["achieved_per_second"] >= 0.98 * 1000.0
    base_1000 = [r for r in results.get("baseline_open", []) if r["target_rate"] == 1000.0]
    steady = results["trainer_steady"]
    lag_p99 = steady["p99_s"] if steady["unapplied"] == 0 else None
    feedback = max(r["events_per_second"] for r in results["feedback_batch"])
    decisions = max(r["decisions_per_second"] for r in results["predict_batch"])
    return {
        "batch_feedback_events_per_s": _goal(feedback, ">= 20000", feedback >= 20_000),
        "batch_predict_decisions_per_s": _goal(decisions, ">= 20000", decisions >= 20_000),
        "single_predict_peak_over_baseline_peak": _goal(
            ratio, ">= 0.6", None if ratio is None else ratio >= 0.6),
        "p99_ms_at_1000_predicts_per_s": {
            **_goal(p99, "<= 20 (and 1000/s achieved)",
                    None if p99 is None else (p99 <= 20.0 and kept_up)),
            # the same open loop against the bare baseline, right after: what the machine
            # and the generator allow at that rate
            "baseline_p99_ms": base_1000[0]["p99_ms"] if base_1000 else None,
            "steal_percent": at_1000[0].get("steal_percent") if at_1000 else None,
            "baseline_steal_percent": base_1000[0].get("steal_percent") if base_1000 else None,
            "redis_forks": at_1000[0].get("redis_forks") if at_1000 else None,
            "redis_child_at_start": at_1000[0].get("redis_child_at_start") if at_1000 else None},
        "trainer_lag_p99_s_at_10k_events_per_s": _goal(
            lag_p99, "< 2 (10k/s achieved)",
            None if lag_p99 is None else (lag_p99 < 2.0 and steady["achieved_events_per_second"]
                                          >= 0.98 * steady["target_events_per_second"])),
    }


def run(*, quick: bool = False, url: str | None = None, admin_token: str | None = None,
        api_workers: int = 1) -> dict[str, Any]:
    """Run the service benchmark; returns the JSON-ready report.

    With ``api_workers > 1`` the load goes to ``noisyloop api --workers N``
    started beside ``noisyloop serve`` (which then runs the trainer, the
    sweeper and NREst), and the baseline runs with as many uvicorn workers.
    """
    secs = 3.0 if quick else 10.0
    cfg: dict[str, Any] = {"seconds": secs, "concurrencies": [1, 8, 32],
                           "rates": [1000.0] if quick else [500.0, 1000.0],
                           "feedback_batches": 30 if quick else 100,
                           "batch_in_flight": [2, 4],
                           "feedback_rate": 10_000.0, "lag_seconds": 5.0 if quick else 10.0,
                           "api_workers": api_workers}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING"}
    with ExitStack() as stack:
        if url is None:
            data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nl-bench-")))
            admin_token = "bench-admin-token-" + os.urandom(12).hex()
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            env_admin = {**env, "NOISYLOOP_ADMIN_TOKEN": admin_token}
            stack.enter_context(server_process(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                 "--data-dir", str(data)], env_admin, url, "/healthz", data / "serve.log"))
            redis_url = (data / "redis.url").read_text("utf-8").strip()
            cfg["redis_url"] = redis_url
            if api_workers > 1:
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                stack.enter_context(server_process(
                    [sys.executable, "-m", "app.cli", "api", "--port", str(port),
                     "--workers", str(api_workers), "--redis-url", redis_url],
                    env_admin, url, "/healthz", data / "api.log"))
            bport = free_port()
            cfg["baseline_url"] = f"http://127.0.0.1:{bport}"
            stack.enter_context(server_process(
                [sys.executable, "-m", "app.bench.baseline", "--port", str(bport),
                 "--redis-url", redis_url, "--workers", str(api_workers)],
                env, cfg["baseline_url"], "/get", data / "baseline.log"))
        if admin_token is None:
            raise ValueError("--url needs --admin-token")
        cfg.update(url=url, api_key=_setup(url, admin_token))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            before = cpu_times()
            results = pool.apply(load, (cfg,))
            results["cpu_percent_during_load"] = cpu_shares(before, cpu_times())
    ratio = None
    if "baseline_closed" in results:
        ratio = {str(p["concurrency"]): round(p["per_second"] / b["per_second"], 3)
                 for p, b in zip(results["predict_closed"], results["baseline_closed"],
                                 strict=True)}
    cfg.pop("api_key", None)
    return {"benchmark": "service", "machine": machine_info(), "config": cfg,
            "results": results, "ratios": {"predict_over_baseline_by_concurrency": ratio,
                                           "predict_peak_over_baseline_peak": peak_ratio(results)},
            "goals": goals(results)}
