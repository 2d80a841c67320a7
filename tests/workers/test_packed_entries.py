"""Packed stream entries (one per joined feedback batch): exactly once across a crash and a
claim, a bad event isolated from its neighbours, entries of one event still read."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.learners.config import ModelConfig
from app.store import ModelKeys, Store, codec
from app.store.delivery import DeliveryStore
from app.store.leases import LeaseStore
from app.store.models import UNAPPLIED_SCAN
from app.store.snapshots import SnapshotStore
from tests.workers.conftest import create_model, decisions, model_config
from tests.workers.test_decisionlog import logged_events
from tests.workers.test_trainer import expected_state, feed, worker


def one_event_entry(event: dict[str, np.ndarray], event_id: str) -> dict[str, bytes]:
    """An entry of one event, as every entry was written before batches were packed."""
    context = {k: v for k, v in event.items() if k != "click"}
    return {"k": b"feedback", "e": event_id.encode(), "c": codec.encode(context),
            "f": codec.encode({"click": event["click"]})}


async def assert_learned_once(store: Store, mk: ModelKeys, config: ModelConfig,
                              events: list[dict[str, np.ndarray]]) -> None:
    """The model applied ``events``, each once, in this order, and nothing is pending."""
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == len(events)
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, events)["W_"],
                               rtol=1e-12, atol=1e-12)
    assert (await store.events.group_progress(mk))[1] == 0


def packed_entry(event_ids: list[bytes], contexts: list[bytes], feedbacks: list[bytes],
                 ) -> dict[str, bytes | int]:
    """A packed entry as ``take_feedback.lua`` writes it (the blobs given as stored)."""
    columns = (event_ids, contexts, feedbacks)
    lengths = np.array([len(v) for column in columns for v in column], dtype=">u4")
    return {"k": b"feedback", "n": len(event_ids), "L": lengths.tobytes(),
            **{name: b"".join(column) for name, column in zip("ecf", columns, strict=True)}}


async def test_packed_entries_are_applied_once_across_a_claim_and_a_crash_after_publish(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 40, per_call=10)  # 4 entries of 10 events
    # a trainer reads about 25 events (3 whole entries: 30) and dies before publishing
    leases, delivery = LeaseStore(store.redis), DeliveryStore(store.redis)
    assert await leases.take_many([mk], "dead", 100) == [True]
    got = await delivery.read_batch(mk, "dead", 25)
    assert got is not None and len(got) == 30 and len(got.entry_ids()) == 3
    await store.redis.delete(mk.lease)
    # the next one claims them, publishes and dies before acknowledging
    acked = DeliveryStore.ack_and_trim

    async def crash(*args: object, **kwargs: object) -> None:
        raise asyncio.CancelledError

    monkeypatch.setattr(DeliveryStore, "ack_and_trim", crash)
    with pytest.raises(asyncio.CancelledError):
        await worker(store, "w1", lease_ttl=0.1, batch_size=25).drain()
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 30  # the claimed 3 entries
    assert (await store.events.group_progress(mk))[1] == 3  # published, not acknowledged
    monkeypatch.setattr(DeliveryStore, "ack_and_trim", acked)
    while await store.redis.exists(mk.lease):
        await asyncio.sleep(0.01)
    # the third trainer skips the 3 applied entries and applies the fourth: each event once
    w2 = worker(store, "w2", batch_size=25)
    assert await w2.drain() + await w2.drain() == 10
    await assert_learned_once(store, mk, config, events)


async def test_a_bad_event_in_a_packed_entry_is_dead_lettered_alone(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    # one batch of 6: event 2's context has the wrong width (the learner refuses it), event
    # 4's context is not a blob at all; then a good batch of 5
    logged, clicks = decisions(config, 6, seed=4)
    logged[2] = (logged[2][0], {**logged[2][1], "x": np.ones(3)})
    await store.events.record_decisions(mk, logged, 60, 60)
    feedbacks = [codec.encode({"click": np.array(c)}) for c in clicks]
    contexts = [codec.encode(ctx) for _, ctx in logged]
    contexts[4] = b"junk"
    sid = await store.redis.xadd(mk.events, packed_entry(  # type: ignore[arg-type]
        [eid.encode() for eid, _ in logged], contexts, feedbacks))
    later = await feed(store, mk, config, 5, seed=5)
    assert await worker(store).drain() == 9
    letters = (await store.dead_letters.page(mk, 100)).items
    assert sorted((letter.event_id, letter.reason.split(":")[0]) for letter in letters) == [
        (logged[2][0], "learner refused the event"), (logged[4][0], "malformed entry")]
    assert {letter.stream_id for letter in letters} == {sid.decode()}
    assert (await store.models.record("t", "m")).dead_lettered == 2  # type: ignore[union-attr]
    # the good neighbours were split off to a new entry, learned after the later batch
    good = [{**ctx, "click": np.array(c)} for k, ((_, ctx), c)
            in enumerate(zip(logged, clicks, strict=True)) if k not in (2, 4)]
    await assert_learned_once(store, mk, config, later + good)
    # a retried dead letter goes back as an entry of one event, read as before
    await store.dead_letters.retry(mk, letters[0].entry_id)
    await worker(store).drain()
    assert (await store.models.record("t", "m")).dead_lettered == 2  # type: ignore[union-attr]


async def test_a_malformed_packed_entry_is_dead_lettered_whole_as_stored(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    entry = packed_entry([b"a", b"b"], [b"C", b"C"], [b"F", b"F"])
    entry["L"] = bytes(entry["L"])[:-4]  # type: ignore[arg-type]  # one length short
    # first an entry of "0 events" (the trainer's read counts it as 1, and goes on reading)
    empty = await store.redis.xadd(mk.events, {**entry, "n": 0})  # type: ignore[arg-type]
    sid = await store.redis.xadd(mk.events, entry)  # type: ignore[arg-type]
    events = await feed(store, mk, config, 3)
    assert await worker(store).drain() == 3
    zero, letter = (await store.dead_letters.page(mk, 100)).items
    assert letter.stream_id == sid.decode() and letter.reason.startswith("malformed entry")
    assert zero.stream_id == empty.decode() and zero.reason.startswith("malformed entry")
    stored = (await store.redis.xrange(mk.dead_letter))[1][1]
    assert stored[b"n"] == b"2" and stored[b"L"] == entry["L"]
    await assert_learned_once(store, mk, config, events)


async def test_entries_of_one_event_and_packed_entries_are_read_in_stream_order(
        store: Store) -> None:
    """A store written before batches were packed: its entries of one event are read, in
    order with the packed ones after them, and the backlog counts events of both."""
    config = model_config()
    mk = await create_model(store, config)
    logged, clicks = decisions(config, 4, seed=7)
    old = [{**ctx, "click": np.array(c)} for (_, ctx), c in zip(logged, clicks, strict=True)]
    for (eid, _), event in zip(logged, old, strict=True):
        await store.redis.xadd(mk.events, one_event_entry(event, eid))  # type: ignore[arg-type]
    new = await feed(store, mk, config, 6, per_call=3)
    record = await store.models.record("t", "m")
    assert record is not None and record.backlog == 10  # 4 entries of 1, 2 of 3
    assert await worker(store).drain() == 10
    await assert_learned_once(store, mk, config, old + new)
    record = await store.models.record("t", "m")
    assert record is not None and record.backlog == 0


async def test_each_logged_event_of_packed_entries_keeps_its_own_context_and_feedback(
        store: Store) -> None:
    """The decision log of packed entries read in several steps (reads of about 25 events
    take whole entries of 10): event by event, in the order joined, each event's own
    context and click; the events of one entry share its stream id."""
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 40, per_call=10)
    stored = [sid.decode() for sid, _ in await store.redis.xrange(mk.events)]
    assert len(stored) == 4
    assert await worker(store, batch_size=25).drain() == 40
    log = await logged_events(store, mk)
    assert [e.event_id for e in log] == [f"e0-{i}" for i in range(40)]
    assert [e.stream_id for e in log] == [sid for sid in stored for _ in range(10)]
    for logged, sent in zip(log, events, strict=True):
        context = codec.decode(logged.context)
        assert sorted(context) == sorted(k for k in sent if k != "click")
        for name, value in context.items():
            np.testing.assert_array_equal(value, sent[name])
        assert float(codec.decode(logged.feedback)["click"]) == float(sent["click"])


async def test_the_backlog_counts_events_past_the_entries_it_reads(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 2 * (UNAPPLIED_SCAN + 5), per_call=2)
    record = await store.models.record("t", "m")
    # the first UNAPPLIED_SCAN entries read, the 5 past them counted at their mean size (2)
    assert record is not None and record.backlog == 2 * (UNAPPLIED_SCAN + 5)
    point = await store.series.context(ModelKeys("t", "m"))
    assert point.backlog == 2 * (UNAPPLIED_SCAN + 5)


async def test_a_crash_after_a_bad_event_is_dead_lettered_loses_none_of_its_neighbours(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dead letter and the split are one step: a trainer dying before its publish leaves
    the good neighbours on the stream (acknowledging the entry with the dead letter alone
    would lose them)."""
    config = model_config()
    mk = await create_model(store, config)
    logged, clicks = decisions(config, 4, seed=8)
    logged[1] = (logged[1][0], {**logged[1][1], "x": np.ones(3)})
    await store.events.record_decisions(mk, logged, 60, 60)
    outcomes = await store.events.take_feedback_many(
        mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks, strict=True)])
    assert [o.status for o in outcomes] == ["ok"] * 4
    publish = SnapshotStore.publish

    async def crash(*args: object, **kwargs: object) -> None:
        raise asyncio.CancelledError

    monkeypatch.setattr(SnapshotStore, "publish", crash)
    with pytest.raises(asyncio.CancelledError):
        await worker(store, "w1", lease_ttl=0.1).drain()
    monkeypatch.setattr(SnapshotStore, "publish", publish)
    while await store.redis.exists(mk.lease):
        await asyncio.sleep(0.01)
    assert await worker(store, "w2").drain() == 3
    good = [{**ctx, "click": np.array(c)} for k, ((_, ctx), c)
            in enumerate(zip(logged, clicks, strict=True)) if k != 1]
    await assert_learned_once(store, mk, config, good)
    [letter] = (await store.dead_letters.page(mk, 100)).items
    assert letter.event_id == logged[1][0]


@pytest.mark.parametrize(("per_entry", "parts"), [(2, 4), (5, 3)])
async def test_a_wide_batch_in_parts_never_cuts_an_entry(store: Store, per_entry: int,
                                                         parts: int) -> None:
    """Parts of 3 rows (``max_dense_cells``): entries of 2 and of 5 events are applied
    whole, each in one publish, so the ``last_id`` check never skips the rest of a cut
    entry."""
    config = model_config()
    mk = await create_model(store, config)
    logged, clicks = decisions(config, 12, seed=9)
    await store.events.record_decisions(mk, logged, 60, 60)
    outcomes = await store.events.take_feedback_many(
        mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks, strict=True)],
        per_entry=per_entry)
    ids = [o.stream_id for o in outcomes]
    assert len(set(ids)) == -(-12 // per_entry) and ids == sorted(ids)  # entries in order
    events = [{**ctx, "click": np.array(c)} for (_, ctx), c in zip(logged, clicks, strict=True)]
    w = worker(store, max_dense_cells=3 * config.n_features)
    assert await w.drain() == 12
    await assert_learned_once(store, mk, config, events)
    # one publish per part, a part ending where an entry ends: rows 0-3, 4-5, 6-9, 10-11
    # of entries of 2; rows 0-4, 5-9, 10-11 of entries of 5
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.version == 1 + parts
