"""The decision log on a real Redis: written by the publish, exactly once, trimmed, deleted."""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
import pytest

from app.store import Store, codec
from app.store.decisionlog import LOGGED_FIELD, LoggedBatch, LoggedEvent, LogRetention
from app.store.delivery import DeliveryStore
from app.store.keys import ModelKeys
from app.store.snapshots import PublishConflict
from app.store.versions import VersionPolicy
from tests.workers.conftest import TENANT, create_model, model_config
from tests.workers.test_trainer import feed, worker


async def test_every_applied_event_is_logged_once_with_its_version_and_stream_id(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 150, per_call=1)
    stored = await store.redis.xrange(mk.events)
    assert await worker(store, batch_size=64).drain() == 150
    log = await logged_events(store, mk)
    assert [e.stream_id for e in log] == [sid.decode() for sid, _ in stored]
    assert [(e.kind, e.event_id, e.context, e.feedback) for e in log] == [
        (f[b"k"].decode(), f[b"e"].decode(), f[b"c"], f[b"f"]) for _, f in stored]
    # reads of 64 then 86 (a full read doubles the next): versions 2 and 3, one entry each
    assert [e.version for e in log] == [2] * 64 + [3] * 86
    assert len(await store.log.read(mk)) == 2 and await logged_count(store, mk) == 150
    np.testing.assert_array_equal(codec.decode(log[0].context)["x"], events[0]["x"])
    assert float(codec.decode(log[0].feedback)["click"]) == float(events[0]["click"])


async def test_a_crash_between_publish_and_ack_logs_each_event_exactly_once(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 40, per_call=8)  # 5 stream entries of 8 events
    acked = DeliveryStore.ack_and_trim

    async def crash(*args: object, **kwargs: object) -> None:
        raise asyncio.CancelledError  # the trainer dies right after the publish

    monkeypatch.setattr(DeliveryStore, "ack_and_trim", crash)
    with pytest.raises(asyncio.CancelledError):
        await worker(store, "w1", lease_ttl=0.1).drain()
    assert (await store.events.group_progress(mk))[1] == 5  # published, never acknowledged
    assert len(await logged_events(store, mk)) == 40
    monkeypatch.setattr(DeliveryStore, "ack_and_trim", acked)
    await feed(store, mk, config, 10, seed=1)
    while await store.redis.exists(mk.lease):  # the dead trainer's lease expires
        await asyncio.sleep(0.01)
    # the re-delivered 40 are skipped (a pass that applies nothing), then the 10 new applied
    assert await worker(store, "w2").drain() == 0
    assert await worker(store, "w2").drain() == 10
    log = await logged_events(store, mk)
    assert [e.event_id for e in log] == [f"e0-{i}" for i in range(40)] + [
        f"e1-{i}" for i in range(10)]
    assert len({e.stream_id for e in log}) == 6  # a feedback batch's events share an entry
    assert len({e.event_id for e in log}) == 50 and await logged_count(store, mk) == 50


async def test_dead_lettered_entries_are_not_logged(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 5)
    await store.redis.xadd(mk.events, {"k": "feedback", "e": "bad", "c": b"junk", "f": b"x"})
    await feed(store, mk, config, 5, seed=1)
    assert await worker(store).drain() == 10
    assert (await store.dead_letters.page(mk, 10)).total == 1
    ids = [e.event_id for e in await logged_events(store, mk)]
    assert len(ids) == 10 and "bad" not in ids


async def test_retention_keeps_the_newest_batches_by_count_and_age_and_zero_is_off(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 300, per_call=1)
    # reads of 50, 100 and 150 (a full read doubles the next)
    assert await worker(store, batch_size=50, log_max_events=120).drain() == 300
    kept = await logged_events(store, mk)
    # the newest batches that hold at least 120 events: the last one alone
    assert len(kept) == 150
    assert [e.event_id for e in kept] == [f"e0-{i}" for i in range(300 - len(kept), 300)]
    assert await logged_count(store, mk) == len(kept)
    assert await store.redis.llen(mk.log_index) == len(await store.log.read(mk))
    # by age: batches older than the limit go with the next publish
    await asyncio.sleep(0.3)
    await feed(store, mk, config, 20, seed=1)
    assert await worker(store, log_max_age=0.2).drain() == 20
    assert [e.event_id for e in await logged_events(store, mk)] == [f"e1-{i}" for i in range(20)]
    assert await logged_count(store, mk) == 20
    # off: nothing more is logged
    other = await create_model(store, model_config("off"))
    await feed(store, other, config, 30)
    assert await worker(store, log_max_events=0).drain() == 30
    assert await store.redis.exists(other.log) == 0


async def logged_events(store: Store, mk: ModelKeys) -> list[LoggedEvent]:
    """Every logged event of ``mk``, oldest first (reads the whole log at once)."""
    return [event for entry in await store.log.read(mk, count=1 << 30)
            for event in entry.events()]


async def logged_count(store: Store, mk: ModelKeys) -> int:
    """The events the log holds by its retention counter."""
    return int(await store.redis.hget(mk.stats, LOGGED_FIELD) or 0)


async def mark(store: Store, mk: ModelKeys, kind: str, detail: dict[str, int]) -> str:
    """Republish the model's state as an explicit change whose step logs the marker
    ``kind`` (as a reset, rollback or promote does); the marker's entry id."""
    snap = await store.snapshots.load(mk)
    assert snap is not None
    await store.versions.publish(mk, snap.state, snap.version, VersionPolicy(), reason=kind,
                                 marker=kind, detail=detail)
    newest = await store.log.read(mk, count=1, newest_first=True)
    assert newest and newest[0].is_marker
    return newest[0].entry_id


async def test_count_retention_trims_batch_by_batch(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    for k in range(6):  # six publishes of 10 events
        await feed(store, mk, config, 10, seed=k)
        assert await worker(store, log_max_events=25).drain() == 10
    ids = [e.event_id for e in await logged_events(store, mk)]
    # the newest three batches hold 30 >= 25 events; dropping one more would leave 20
    assert ids == [f"e{k}-{i}" for k in (3, 4, 5) for i in range(10)]


async def test_markers_are_logged_and_the_log_goes_with_the_model(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 3)
    assert await worker(store).drain() == 3
    version = await store.snapshots.version(mk)
    marker_id = await mark(store, mk, "rollback", {"to": 1})
    entries = await store.log.read(mk)
    assert [e.is_marker for e in entries] == [False, True]
    assert entries[-1].entry_id == marker_id and entries[-1].events() == []
    assert entries[-1].fields[b"m"] == b"rollback"
    assert orjson.loads(entries[-1].fields[b"d"]) == {"to": 1, "version": (version or 0) + 1}
    state = (await store.snapshots.load(mk)).state  # type: ignore[union-attr]
    assert await store.models.delete(TENANT, "m")
    assert await store.redis.exists(mk.log, mk.log_index) == 0
    # a marked change that raced the delete starts no log
    with pytest.raises(PublishConflict):
        await store.versions.publish(mk, state, 3, VersionPolicy(), reason="promote",
                                     marker="promote", detail={})
    assert await store.redis.exists(mk.log) == 0


async def test_a_large_backlog_is_trimmed_at_most_100_batches_per_publish(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    state = (await store.snapshots.load(mk)).state  # type: ignore[union-attr]
    sid = iter(range(1, 1000))

    async def publish(n: int, retention: LogRetention) -> None:
        ids = [f"1-{next(sid)}" for _ in range(n)]
        await store.snapshots.publish(mk, state, logged=LoggedBatch.pack(
            [ids, [b"feedback"] * n, [b"e"] * n, [b"c"] * n, [b"f"] * n]), retention=retention)

    for _ in range(250):
        await publish(1, LogRetention(10_000, 0))
    # the limit lowered to 1 event: one call drops 100 of the 250 old batches, not all
    await publish(1, LogRetention(1, 0))
    assert await store.redis.llen(mk.log_index) == 151 and await logged_count(store, mk) == 151
    assert len(await store.log.read(mk, count=1000)) == 151
    await publish(1, LogRetention(1, 0))
    await publish(1, LogRetention(1, 0))
    assert [e.stream_id for e in await logged_events(store, mk)] == ["1-253"]
    assert await logged_count(store, mk) == 1
    # an index lost (e.g. evicted) while its counter stayed: the publish still goes through
    await store.redis.delete(mk.log_index)
    await store.redis.hset(mk.stats, "log_events", 5)
    await publish(1, LogRetention(1, 0))
    assert [e.stream_id for e in await logged_events(store, mk)] == ["1-253", "1-254"]
    assert await store.redis.llen(mk.log_index) == 1 and await logged_count(store, mk) == 1
    await publish(1, LogRetention(1, 0))
    assert [e.stream_id for e in await logged_events(store, mk)] == ["1-255"]


async def test_with_the_log_off_what_it_held_still_goes_by_age(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 30)
    assert await worker(store, log_max_events=1000).drain() == 30
    await asyncio.sleep(0.3)
    marker = await mark(store, mk, "rollback", {"to": 1})
    await feed(store, mk, config, 10, seed=1)
    # off, with an age limit: the old batch goes (the newer marker stays), nothing is added
    assert await worker(store, log_max_events=0, log_max_age=0.2).drain() == 10
    assert [e.entry_id for e in await store.log.read(mk)] == [marker]
    assert await logged_count(store, mk) == 0 and await store.redis.llen(mk.log_index) == 0
    # an explicit publish (reset, import) logs and trims nothing
    await store.snapshots.publish(mk, (await store.snapshots.load(mk)).state)  # type: ignore[union-attr]
    assert [e.entry_id for e in await store.log.read(mk)] == [marker]


async def test_scan_reads_one_entry_first_and_grows_while_reads_hold_few_events(
        store: Store, log_read_counts: list[int]) -> None:
    config = model_config()
    mk = await create_model(store, config)
    state = (await store.snapshots.load(mk)).state  # type: ignore[union-attr]
    for k in range(40):  # 40 batches of 100 events
        ids = [f"1-{100 * k + i + 1}" for i in range(100)]
        await store.snapshots.publish(mk, state, logged=LoggedBatch.pack(
            [ids, [b"feedback"] * 100, [b"e"] * 100, [b"c"] * 100, [b"f"] * 100]))
    counts = log_read_counts
    counts.clear()
    entries = [e async for e in store.log.scan(mk, events_per_read=350)]
    assert len(entries) == 40 and sum(e.size for e in entries) == 4000
    # 100 and 200 events held: twice as many next; 400 >= 350: reads of 4 to the end
    assert counts == [1, 2] + [4] * 10
    counts.clear()
    newest = [e async for e in store.log.scan(mk, newest_first=True)]
    assert newest == entries[::-1] and counts == [1, 2, 4, 8, 16, 32]


def test_min_ms_of_the_age_limit() -> None:
    assert LogRetention(10, 0).min_ms() == 0
    assert LogRetention(10, 2.5).min_ms(now=100.0) == 97500
    assert not LogRetention(0).enabled
