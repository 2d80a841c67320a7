"""The decision log on a real Redis: written by the publish, exactly once, trimmed, deleted."""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
import pytest

from app.store import ModelKeys, Store, codec
from app.store.decisionlog import LogEntry, LogRetention
from app.store.delivery import DeliveryStore
from tests.workers.conftest import TENANT, create_model, model_config
from tests.workers.test_trainer import feed, worker


async def logged_events(store: Store, mk: ModelKeys) -> list[LogEntry]:
    return [e for e in await store.log.read(mk, count=1_000_000) if not e.is_marker]


async def test_every_applied_event_is_logged_once_with_its_version_and_stream_id(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 150)
    stream_ids = [sid.decode() for sid, _ in await store.redis.xrange(mk.events)]
    assert await worker(store, batch_size=64).drain() == 150
    log = await logged_events(store, mk)
    assert [e.fields[b"s"].decode() for e in log] == stream_ids
    # reads of 64 then 86 (a full read doubles the next): versions 2 and 3
    assert [int(e.fields[b"v"]) for e in log] == [2] * 64 + [3] * 86
    first = log[0].fields
    assert first[b"k"] == b"feedback" and first[b"e"] == b"e0-0"
    np.testing.assert_array_equal(codec.decode(first[b"c"])["x"], events[0]["x"])
    assert float(codec.decode(first[b"f"])["click"]) == float(events[0]["click"])
    assert all(e.applied_ms >= int(e.fields[b"s"].split(b"-")[0]) for e in log)


async def test_a_crash_between_publish_and_ack_logs_each_event_exactly_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 40)
    acked = DeliveryStore.ack_and_trim

    async def crash(*args: object, **kwargs: object) -> None:
        raise asyncio.CancelledError  # the trainer dies right after the publish

    monkeypatch.setattr(DeliveryStore, "ack_and_trim", crash)
    with pytest.raises(asyncio.CancelledError):
        await worker(store, "w1", lease_ttl=0.1).drain()
    assert (await store.events.group_progress(mk))[1] == 40  # published, never acknowledged
    assert len(await logged_events(store, mk)) == 40
    monkeypatch.setattr(DeliveryStore, "ack_and_trim", acked)
    await feed(store, mk, config, 10, seed=1)
    await asyncio.sleep(0.15)  # the dead trainer's lease expires
    # the re-delivered 40 are skipped (a pass that applies nothing), then the 10 new applied
    assert await worker(store, "w2").drain() == 0
    assert await worker(store, "w2").drain() == 10
    log = await logged_events(store, mk)
    ids = [e.fields[b"e"].decode() for e in log]
    assert ids == [f"e0-{i}" for i in range(40)] + [f"e1-{i}" for i in range(10)]
    assert len({e.fields[b"s"] for e in log}) == 50


async def test_dead_lettered_entries_are_not_logged(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 5)
    await store.redis.xadd(mk.events, {"k": "feedback", "e": "bad", "c": b"junk", "f": b"x"})
    await feed(store, mk, config, 5, seed=1)
    assert await worker(store).drain() == 10
    assert (await store.dead_letters.page(mk, 10)).total == 1
    ids = [e.fields[b"e"] for e in await logged_events(store, mk)]
    assert len(ids) == 10 and b"bad" not in ids


async def test_retention_trims_by_count_and_by_age_and_zero_turns_the_log_off(
        store: Store) -> None:
    await store.redis.config_set("stream-node-max-entries", 10)  # trims in nodes of 10
    try:
        config = model_config()
        mk = await create_model(store, config)
        await feed(store, mk, config, 300)
        assert await worker(store, batch_size=50, log_max_events=40).drain() == 300
        kept = await logged_events(store, mk)
        assert 40 <= len(kept) <= 60  # approximate: whole nodes go
        assert kept[-1].fields[b"e"] == b"e0-299"
        # by age: entries older than the limit go with the next publish
        await asyncio.sleep(0.3)
        await feed(store, mk, config, 20, seed=1)
        assert await worker(store, log_max_age=0.2).drain() == 20
        ids = [e.fields[b"e"] for e in await logged_events(store, mk)]
        assert ids == [f"e1-{i}".encode() for i in range(20)]
        # off: nothing more is logged
        other = await create_model(store, model_config("off"))
        await feed(store, other, config, 30)
        assert await worker(store, log_max_events=0).drain() == 30
        assert await store.redis.exists(other.log) == 0
    finally:
        await store.redis.config_set("stream-node-max-entries", 100)


async def test_markers_are_logged_and_the_log_goes_with_the_model(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 3)
    assert await worker(store).drain() == 3
    marker_id = await store.log.append_marker(mk, "rollback", {"to": 1})
    entries = await store.log.read(mk)
    assert [e.is_marker for e in entries] == [False] * 3 + [True]
    assert entries[-1].entry_id == marker_id
    assert entries[-1].fields[b"m"] == b"rollback"
    assert orjson.loads(entries[-1].fields[b"d"]) == {"to": 1}
    assert await store.log.length(mk) == 4
    assert await store.models.delete(TENANT, "m")
    assert await store.redis.exists(mk.log) == 0


def test_min_id_of_the_age_limit() -> None:
    assert LogRetention(10, 0).min_id() == "0"
    assert LogRetention(10, 2.5).min_id(now=100.0) == "97500"
    assert not LogRetention(0).enabled
