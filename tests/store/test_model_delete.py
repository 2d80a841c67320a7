"""A model delete finds the model's keys on its own indexes: no scan, whatever the store holds.

The store is filled with cheap keys (``DEBUG POPULATE``); the delete's commands are read with
``MONITOR`` and its Redis time from the command stats of the same server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import redis

from app.store import ModelKeys, Store
from app.store.embedded import EmbeddedRedis
from tests.store.test_events import CLICK, CONFIG, CTX

pytestmark = pytest.mark.slow

MK = ModelKeys("t", "m")
#: Keys of other owners in the store: the acceptance's 3,000,000.
FILLER = 3_000_000
#: Redis time a delete may take (the acceptance); a scan of the filler alone takes seconds.
REDIS_BUDGET_USEC = 50_000
#: The monitor's last command: everything sent before it was the delete's.
END = "end-of-delete"


@contextmanager
def monitored(url: str) -> Iterator[list[list[str]]]:
    """Every command Redis runs in the body, as its words (read with MONITOR)."""
    seen: list[list[str]] = []
    client = redis.Redis.from_url(url)
    monitor = client.monitor()
    monitor.__enter__()
    ready = threading.Event()

    def read() -> None:
        ready.set()
        while True:
            words = monitor.next_command()["command"].split(" ")
            if words[-1] == END:
                return
            seen.append(words)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    ready.wait()
    try:
        yield seen
    finally:
        client.echo(END)
        thread.join(30)
        monitor.__exit__()
        client.close()


def _redis_usec(client: redis.Redis) -> int:
    return sum(int(stats["usec"]) for stats in client.info("commandstats").values())


async def _fill_model(store: Store) -> None:
    """Decisions answered, open, deferred and expired, one job of each kind, and a client's
    event id with a reward kept for it."""
    await store.tenants.create("t")
    await store.models.create("t", CONFIG, {"W_": np.zeros((3, 2)),
                                            "noise_rates_": np.zeros(2)}, 0.0, 0.0)
    ids = [f"e{i}" for i in range(300)]
    await store.events.record_decisions(MK, [(e, CTX) for e in ids[:200]], 60, 60,
                                        apprentice=[True] * 200)
    await store.events.record_decisions(MK, [(e, CTX) for e in ids[200:]], 60, 60, defer=True)
    await store.events.take_feedback_many(MK, [(e, CLICK) for e in ids[:100]])
    await store.noise.queue_estimate(MK)
    await store.evaluations.queue(MK, {"policy": "greedy"})
    assert await store.aliases.claim(MK, "client-1", 600)
    assert await store.aliases.keep_reward(MK, "client-1", {"news": 1.0}, 600)


@pytest.fixture
def own_redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of the test's own: the filler never slows the session's."""
    server = EmbeddedRedis(tmp_path, appendonly=False).start()
    try:
        yield server.url
    finally:
        server.stop()


async def test_delete_model_touches_only_its_keys_in_a_full_store(own_redis_url: str) -> None:
    redis_url = own_redis_url
    store = Store.from_url(redis_url)
    try:
        await _fill_model(store)
        own = {k.decode() for k in await store.redis.keys(f"{MK.tag}:*")}
        assert len(own) > 500  # contexts, tombstones, apprentice flags, jobs
        with redis.Redis.from_url(redis_url, socket_timeout=120) as sync:
            others = {k.decode() for k in sync.keys("nl:*")} - own  # registry, job queues
            sync.execute_command("DEBUG", "POPULATE", FILLER, "filler")
            sync.config_resetstat()
            with monitored(redis_url) as seen:
                assert await store.models.delete("t", "m")
            usec = _redis_usec(sync)
            left = {k.decode() for k in sync.keys("nl:*")}
            assert left <= others  # the tenant's emptied model sets are gone too
            assert sync.dbsize() == FILLER + len(left)
    finally:
        await store.close()
    names = {words[0].lower() for words in seen}
    assert {"exists", "unlink"} <= names and not names & {"scan", "keys"}, names
    registry = {"nl:{tenants}:models:t", "nl:{tenants}:all-models", "nl:{sweep}:due",
                "nl:{jobs}:noise-due"}
    touched = {w for words in seen for w in words[1:] if w.startswith("nl:")}
    assert all(key.startswith(f"{MK.tag}:") for key in touched - registry), touched
    assert usec < REDIS_BUDGET_USEC, usec
