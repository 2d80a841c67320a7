"""Idle models sleep: the trainer stops reading them until a feedback wakes them."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import redis

from app.store import Store
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, decisions, model_config
from workers.worker import Worker

#: Seconds the trainer needs to put an idle model to sleep (its waits double from 10 ms to
#: idle_interval, 0.1 s, then one read with the flag), with room for a busy machine.
SLEEP_WITHIN = 5.0
#: Seconds within which a woken model's event is applied (one pass at flush_interval).
APPLIED_WITHIN = 5.0
#: Seconds the sleeping model is watched: an idle trainer that read it every idle_interval
#: would run 20 reads in them.
WATCH = 2.0


def _reads(r: redis.Redis) -> int:
    """``trainer_read`` steps Redis ran so far (each runs one XPENDING; nothing else does)."""
    return int(r.info("commandstats").get("cmdstat_xpending", {}).get("calls", 0))


async def _until(check, within: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.02)
    return False


async def test_idle_model_sleeps_until_feedback_wakes_it(store: Store, redis_url: str) -> None:
    config = model_config()
    mk = await create_model(store, config)
    stop = asyncio.Event()
    settings = WorkerSettings(roles=("trainer",), worker_id="wake", flush_interval=0.01,
                              idle_interval=0.1, nrest_threads=True)
    running = asyncio.create_task(Worker(store, settings).run(stop))
    try:
        assert await _until(lambda: store.redis.exists(mk.asleep), SLEEP_WITHIN)
        with redis.Redis.from_url(redis_url) as r:
            before = _reads(r)
            await asyncio.sleep(WATCH)
            assert _reads(r) - before == 0  # asleep: not read at all
        logged, _ = decisions(config, 1)
        await store.events.record_decisions(mk, logged, 60, 60)
        assert (await store.events.take_feedback(mk, logged[0][0],
                                                 {"click": np.array(1.0)})).status == "ok"
        assert not await store.redis.exists(mk.asleep)  # the feedback's step woke it

        async def applied() -> bool:
            info = await store.snapshots.info(mk)
            return info is not None and info.events_applied == 1

        assert await _until(applied, APPLIED_WITHIN)
    finally:
        stop.set()
        await running
