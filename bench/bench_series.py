"""CPU cost of the per-model quality series in the trainer: series on against off, same run.

Starts a throw-away redis-server, creates ``--models`` models (rcnbf, the
service benchmark's shape: d = 64, K = 10) and one trainer context, then
runs ``--rounds`` rounds.  Each round logs ``--events`` decisions per model
with a noisy click each (not timed), then the trainer drains every model's
stream (timed: this process's CPU time, every thread, plus redis-server's).
Rounds alternate the series off (``series_interval`` 0) and on (the
interval given), so both arms see the same machine; the arms' CPU per
applied event are compared (medians of the rounds, and the totals).  As the
difference is below the machine's noise, the on rounds also time every call
of :func:`workers.series.record` itself (this process's CPU time around it):
its share of the on rounds' trainer CPU is the direct measure.

The interval's clock runs through the off rounds too, so the on rounds
write the points of the whole run: at least the real write cost, attributed
to half the events.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_series.py --interval 10
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_series.py --interval 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from app.bench.machine import linux_process_cpu_seconds, machine_info
from app.bench.results import write_results
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.sim.feedback import noisy_clicks
from app.store import ModelKeys, Store
from app.store.embedded import EmbeddedRedis
from app.worker_settings import WorkerSettings
from workers import series, trainer
from workers.worker import Worker

N_FEATURES, N_CLASSES = 64, 10


async def create_models(store: Store, n: int) -> list[tuple[ModelKeys, Any]]:
    """``n`` rcnbf models of tenant ``bench``; each with a learner that logs its decisions."""
    await store.tenants.create("bench")
    out = []
    for i in range(n):
        config = ModelConfig.of({
            "model_id": f"m{i}", "task": "label", "algorithm": "rcnbf", "n_features": N_FEATURES,
            "n_classes": N_CLASSES, "params": {"rho0": 0.1, "rho1": 0.2}, "seed": i,
            "uid": f"m{i}", "feedback": {"wait_seconds": 3600, "on_timeout": "drop"}})
        learner = build_learner(config)
        await store.models.create("bench", config, learner.get_state(), 0.1, 0.2)
        out.append((ModelKeys("bench", f"m{i}"), learner))
    return out


async def feed(store: Store, mk: ModelKeys, learner: Any, n: int, start: int,
               rng: np.random.Generator) -> None:
    """Log ``n`` decisions of ``learner`` and join a noisy click to each (as the API does)."""
    X = rng.random((n, N_FEATURES))
    y = rng.integers(0, N_CLASSES, n)
    ctxs = [(f"e{start + i}", learner.decide(X[i]).context) for i in range(n)]
    await store.events.record_decisions(mk, ctxs, 3600, 60)
    played = np.array([int(c["played"]) for _, c in ctxs])
    clicks = noisy_clicks((played == y).astype(float), 0.1, 0.2, rng)
    await store.events.take_feedback_many(
        mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(ctxs, clicks, strict=True)])


async def run(url: str, redis_pid: int, models: int, events: int, rounds: int,
              interval: float, batch_size: int) -> dict[str, Any]:
    store = Store.from_url(url, socket_timeout=30)
    made = await create_models(store, models)
    worker = Worker(store, WorkerSettings(roles=("trainer",), worker_id="bench",
                                          batch_size=batch_size, nrest_threads=True,
                                          series_interval=interval))
    ctx = await worker.start()
    rng = np.random.default_rng(0)
    record = series.record
    spent = [0.0]

    async def timed_record(*args: Any) -> None:
        started = time.process_time()
        try:
            await record(*args)
        finally:
            spent[0] += time.process_time() - started

    series.record = timed_record  # type: ignore[assignment]  # the trainer calls it through the module
    arms: dict[str, dict[str, list[float]]] = {
        arm: {"cpu": [], "redis_cpu": [], "events": []} for arm in ("off", "on")}
    try:
        for r in range(rounds):
            for mk, learner in made:
                await feed(store, mk, learner, events, r * events, rng)
            arm = "on" if r % 2 else "off"
            ctx.series_interval = interval if arm == "on" else 0.0
            cpu0, redis0 = time.process_time(), linux_process_cpu_seconds(redis_pid)
            applied = 0
            while True:
                done = await trainer.run_pass(ctx)
                applied += done
                if done == 0 and applied >= models * events:
                    break
            arms[arm]["cpu"].append(time.process_time() - cpu0)
            arms[arm]["redis_cpu"].append(linux_process_cpu_seconds(redis_pid) - redis0)
            arms[arm]["events"].append(applied)
        points = sum([len(await store.series.read(mk)) for mk, _ in made])
    finally:
        series.record = record  # type: ignore[assignment]
        await worker.close()
        await store.close()
    out: dict[str, Any] = {"points_written": points, "series_record_cpu_s": round(spent[0], 4)}
    for arm, m in arms.items():
        per_event = [c / n * 1e6 for c, n in zip(m["cpu"], m["events"], strict=True)]
        n = sum(m["events"])
        out[arm] = {"rounds": len(per_event), "events": int(n),
                    "trainer_cpu_s": round(sum(m["cpu"]), 3),
                    "redis_cpu_s": round(sum(m["redis_cpu"]), 3),
                    "trainer_us_per_event_median": round(statistics.median(per_event), 2),
                    "trainer_us_per_event": round(sum(m["cpu"]) / n * 1e6, 2),
                    "with_redis_us_per_event": round(
                        (sum(m["cpu"]) + sum(m["redis_cpu"])) / n * 1e6, 2)}
    on, off = out["on"], out["off"]
    out["overhead_trainer_median"] = round(
        on["trainer_us_per_event_median"] / off["trainer_us_per_event_median"] - 1, 4)
    out["overhead_trainer"] = round(on["trainer_us_per_event"] / off["trainer_us_per_event"] - 1,
                                    4)
    out["overhead_with_redis"] = round(
        on["with_redis_us_per_event"] / off["with_redis_us_per_event"] - 1, 4)
    out["series_share_of_on_trainer_cpu"] = round(spent[0] / sum(arms["on"]["cpu"]), 5)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--events", type=int, default=2000, help="events per model per round")
    parser.add_argument("--rounds", type=int, default=20, help="rounds (alternating off, on)")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="series_interval of the on rounds, seconds")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), appendonly=False).start()
        try:
            assert server.process is not None
            result = asyncio.run(run(server.url, server.process.pid, args.models, args.events,
                                     args.rounds, args.interval, args.batch_size))
        finally:
            server.stop()
    result = {"args": vars(args) | {"json": None}, "machine": machine_info(), **result}
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    if args.json:
        write_results(args.json, result)


if __name__ == "__main__":
    main()
