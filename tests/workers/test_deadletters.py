"""Dead letters on a real Redis: moved once, counted with the move, capped, dropped, retried."""

from __future__ import annotations

import numpy as np
import pytest

from app.store import ModelKeys, Store, codec, deadletters
from app.store.delivery import Deliveries, DeliveryStore
from app.store.leases import LeaseStore
from tests.workers.conftest import TENANT, create_model, model_config


async def delivered(store: Store, n: int) -> tuple[ModelKeys, DeliveryStore, Deliveries]:
    """A model with ``n`` stream entries delivered to trainer ``w1`` (pending)."""
    mk = await create_model(store, model_config())
    for i in range(n):
        await store.redis.xadd(mk.events, {"k": "feedback", "e": f"e{i}", "c": b"junk",
                                           "f": codec.encode({"click": np.array(1.0)})})
    delivery = DeliveryStore(store.redis)
    await LeaseStore(store.redis).take_many([mk], "w1", 10_000)
    batch = await delivery.read_batch(mk, "w1", 100)
    assert batch is not None and len(batch) == n
    return mk, delivery, batch


async def counters(store: Store, mk: ModelKeys) -> tuple[int, int]:
    record = await store.models.record(TENANT, mk.model)
    assert record is not None
    return record.dead_lettered, record.dead_letters_dropped


async def test_move_acknowledges_counts_and_never_moves_an_entry_twice(store: Store) -> None:
    mk, delivery, batch = await delivered(store, 3)
    items = [(i, f"bad {i}") for i in range(3)]
    assert await delivery.dead_letter(mk, batch, items) == 3
    # a trainer that lost its lease moves the same entries again: nothing happens
    assert await delivery.dead_letter(mk, batch, items) == 0
    assert await counters(store, mk) == (3, 0)
    assert (await store.events.group_progress(mk))[1] == 0
    page = await store.dead_letters.page(mk, 2)
    assert page.total == 3 and [d.event_id for d in page.items] == ["e0", "e1"]
    first = page.items[0]
    assert first.stream_id == batch.stream_ids[0] and first.reason == "bad 0"
    assert first.kind == "feedback" and first.deliveries == 1
    assert first.fields is None and first.feedback == {"click": 1.0}  # context undecodable
    rest = await store.dead_letters.page(mk, 2, page.next_after)
    assert [d.event_id for d in rest.items] == ["e2"] and rest.next_after is None


async def test_move_beyond_the_cap_drops_the_oldest_and_counts_them(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadletters, "DEAD_LETTER_MAXLEN", 2)
    mk, delivery, batch = await delivered(store, 3)
    assert await delivery.dead_letter(mk, batch, [(i, "bad") for i in range(3)]) == 3
    assert await counters(store, mk) == (2, 1)
    assert [d.event_id for d in (await store.dead_letters.page(mk, 10)).items] == ["e1", "e2"]


async def test_drop_one_and_all_and_retry(store: Store) -> None:
    mk, delivery, batch = await delivered(store, 4)
    await delivery.dead_letter(mk, batch, [(i, "bad") for i in range(4)])
    ids = [d.entry_id for d in (await store.dead_letters.page(mk, 10)).items]
    assert await store.dead_letters.drop(mk, ids[0]) == 1
    assert await store.dead_letters.drop(mk, ids[0]) == 0  # already gone
    assert await counters(store, mk) == (3, 1)
    before = await store.events.last_stream_id(mk)
    new_id = await store.dead_letters.retry(mk, ids[1])
    assert new_id is not None and new_id > before
    assert await store.dead_letters.retry(mk, ids[1]) is None
    entry = (await store.redis.xrange(mk.events, new_id, new_id))[0][1]  # type: ignore[index]
    assert entry == {b"k": b"feedback", b"e": b"e1", b"c": b"junk",
                     b"f": codec.encode({"click": np.array(1.0)})}
    assert await counters(store, mk) == (2, 1)
    assert await store.dead_letters.drop(mk) == 2
    assert await counters(store, mk) == (0, 3)
    assert (await store.dead_letters.page(mk, 10)).total == 0


async def test_nothing_is_written_for_a_deleted_model(store: Store) -> None:
    mk, delivery, batch = await delivered(store, 1)
    await store.models.delete(TENANT, mk.model)
    assert await delivery.dead_letter(mk, batch, [(0, "bad")]) == 0
    assert not await store.redis.exists(mk.dead_letter, mk.stats)


async def test_count_follows_the_stream_for_dead_letters_older_than_the_count(
        store: Store) -> None:
    mk, delivery, batch = await delivered(store, 2)
    await delivery.dead_letter(mk, batch, [(0, "bad"), (1, "bad")])
    await store.redis.hset(mk.stats, "events_dead_lettered", 0)  # written before it was counted
    first = (await store.dead_letters.page(mk, 10)).items[0].entry_id
    assert await store.dead_letters.drop(mk, first) == 1
    assert await counters(store, mk) == (1, 1)  # never negative: the dead letters still held
