"""A model's failures and changes never hold up the trainer's other models, nor lose events:
chunked claims, isolated steps, refused publishes learned again, idle models paced."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from app.learners.build import build_learner
from app.store import ModelKeys, Store
from app.store.delivery import DeliveryStore
from app.store.leases import LeaseStore
from tests.workers.conftest import create_model, model_config
from tests.workers.test_trainer import expected_state, feed, worker
from workers import trainer
from workers.pacing import MAX_FAILURE_WAIT, Pacer


async def test_read_claims_more_pending_entries_than_lua_can_unpack(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 9_000, per_call=1)
    leases, delivery = LeaseStore(store.redis), DeliveryStore(store.redis)
    assert await leases.take_many([mk], "dead", 60_000) == [True]
    first = await delivery.read_batch(mk, "dead", 9_000)  # a trainer killed mid-batch
    assert first is not None and len(first) == 9_000
    await store.redis.delete(mk.lease)  # its lease expired
    assert await leases.take_many([mk], "w1", 60_000) == [True]
    # 8,000: the trainer's read under a backlog (8 x the default batch size)
    again = await delivery.read_batch(mk, "w1", 8_000)
    assert again is not None and again.stream_ids == first.stream_ids[:8_000]
    assert set(again.counts) == {2}
    assert (await store.events.group_progress(mk))[1] == 9_000


async def test_a_model_failing_every_step_never_delays_another_model_by_a_pass(
        store: Store) -> None:
    bad, good = model_config("a-bad"), model_config("b-good")  # the failing one steps first
    mk_bad, mk_good = await create_model(store, bad), await create_model(store, good)
    await feed(store, mk_bad, bad, 20, per_call=1)
    await store.redis.hset(mk_bad.snapshot, "state", b"not a state")  # corrupt
    w = worker(store)
    ctx = await w.start()
    ctx.paced = False  # the failing model is tried (and fails) on every pass
    try:
        for i in range(4):
            await feed(store, mk_good, good, 5, seed=10 + i)
            assert await trainer.run_pass(ctx) == 5  # applied in the pass that follows
            info = await store.snapshots.info(mk_good)
            assert info is not None and info.events_applied == 5 * (i + 1)
        record = await store.models.record("t", "a-bad")
        assert record is not None and record.trainer_failure is not None
        assert record.trainer_failure.failed_steps == 4
        assert record.trainer_failure.error.startswith("CodecError")
        assert (await store.events.group_progress(mk_bad))[1] == 20  # pending, not lost
        m = ctx.metrics
        assert m.trainer_step_failures._value.get() == 4
        assert m.trainer_failing_models._value.get() == 1
        # repaired: the next step applies its events and clears the record
        await store.redis.hset(mk_bad.snapshot, "state",
                               (await _encoded_initial_state(bad)))
        assert await trainer.run_pass(ctx) == 20
        record = await store.models.record("t", "a-bad")
        assert record is not None and record.trainer_failure is None
        assert m.trainer_failing_models._value.get() == 0
    finally:
        await w.close()


async def _encoded_initial_state(config: dict[str, Any]) -> bytes:
    from app.store import codec

    return codec.encode(build_learner(config).get_state())


async def test_publishes_refused_by_model_changes_apply_every_event_once_none_dead(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 40)
    w = worker(store, max_deliveries=2, batch_size=16)
    ctx = await w.start()
    read_model = ctx.delivery.read_model
    changes = 12  # > 3 x max_deliveries: each refusal used to count as a delivery

    async def read_then_reset(keys: ModelKeys) -> Any:
        """The trainer reads the model, then a reset publishes a new version before the
        trainer's publish (which is refused)."""
        nonlocal changes
        view = await read_model(keys)
        if changes:
            changes -= 1
            await store.snapshots.publish(mk, build_learner(config).get_state())  # a reset
        return view

    monkeypatch.setattr(ctx.delivery, "read_model", read_then_reset)
    ctx.paced = False
    applied = []
    try:
        while sum(applied) < 40 and len(applied) < 50:
            applied.append(await trainer.run_pass(ctx))
    finally:
        await w.close()
    # 3 tries a pass: 4 passes refused, then smaller batches (halved at each refusal)
    assert changes == 0 and applied[:4] == [0, 0, 0, 0] and sum(applied) == 40
    assert await store.dead_letters.held(mk) == 0
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 40
    # each event applied once, on the reset state (the initial weights)
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, events)["W_"],
                               rtol=1e-12, atol=1e-12)
    assert (await store.events.group_progress(mk))[1] == 0


async def test_unread_sets_the_delivery_counts_back_for_the_lease_owner_only(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 3, per_call=1)
    leases, delivery = LeaseStore(store.redis), DeliveryStore(store.redis)
    assert await leases.take_many([mk], "w1", 60_000) == [True]
    for _ in range(2):
        batch = await delivery.read_batch(mk, "w1", 10)
        assert batch is not None and batch.counts == [1, 1, 1] and len(batch) == 3
        assert await delivery.unread(mk, "w1", batch)
    batch = await delivery.read_batch(mk, "w1", 10)
    assert batch is not None
    await store.redis.xack(mk.events, "trainers", batch.stream_ids[0])
    assert not await delivery.unread(mk, "w2", batch)  # not the lease owner: nothing done
    assert await delivery.unread(mk, "w1", batch)
    again = await delivery.read_batch(mk, "w1", 10)
    assert again is not None and again.stream_ids == batch.stream_ids[1:]
    assert again.counts == [1, 1]  # the acknowledged entry stays acknowledged


def test_idle_models_wait_longer_up_to_the_idle_interval_and_failures_back_off() -> None:
    pacer = Pacer(flush_interval=0.05, idle_interval=0.5, retry_delay=1.0)
    ref = ("t", "m")
    waits = []
    for _ in range(6):
        pacer.idle(ref, 0.0)
        waits.append(next(t for t in np.arange(0, 2, 0.05) if pacer.due(ref, t)))
    np.testing.assert_allclose(waits, [0.05, 0.1, 0.2, 0.4, 0.5, 0.5])
    pacer.busy(ref)
    assert pacer.due(ref, -math.inf + 1)
    assert [pacer.failed(ref, 0.0) for _ in range(3)] == [1, 2, 3]
    assert not pacer.due(ref, 3.9) and pacer.due(ref, 4.0)
    for _ in range(10):
        pacer.failed(ref, 0.0)
    assert pacer.due(ref, MAX_FAILURE_WAIT) and not pacer.due(ref, MAX_FAILURE_WAIT - 0.1)
    assert pacer.succeeded(ref) == 13 and pacer.succeeded(ref) is None


async def test_idle_models_are_read_less_often_and_an_entry_puts_them_back(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    w = worker(store, idle_interval=0.2)
    ctx = await w.start()
    ref = (mk.tenant, mk.model)
    reads = 0
    read_batch, read_batches = ctx.delivery.read_batch, ctx.delivery.read_batches

    async def counted_one(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await read_batch(*args)

    async def counted(models: list[tuple[ModelKeys, int]], consumer: str) -> Any:
        nonlocal reads
        reads += len(models)
        return await read_batches(models, consumer)

    ctx.delivery.read_batch = counted_one  # type: ignore[method-assign]
    ctx.delivery.read_batches = counted  # type: ignore[method-assign]
    try:
        for _ in range(20):  # back to back: only the first pass reads the idle model
            await trainer.run_pass(ctx)
        assert reads == 1
        await feed(store, mk, config, 3)
        ctx.pacer.busy(ref)  # as if its wait had passed
        assert await trainer.run_pass(ctx) == 3
    finally:
        await w.close()


async def test_a_stop_mid_pass_leaves_the_batches_read_undelivered(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    configs = [model_config(f"m{i}") for i in range(3)]
    models = [await create_model(store, c) for c in configs]
    w = worker(store)
    ctx = await w.start()
    assert await trainer.run_pass(ctx) == 0  # idle: their next reads share a round trip
    for mk, config in zip(models, configs, strict=True):
        await feed(store, mk, config, 5)
    ctx.paced = False
    step = trainer.step

    async def step_then_stop(*args: Any) -> int:
        ctx.stopping.set()  # a SIGTERM during the first model's step
        return await step(*args)

    monkeypatch.setattr(trainer, "step", step_then_stop)
    try:
        assert await trainer.run_pass(ctx) == 5
    finally:
        await w.close()
    for mk in models[1:]:  # read in the pass, handed back: the next owner's first delivery
        await LeaseStore(store.redis).take_many([mk], "w2", 60_000)
        batch = await DeliveryStore(store.redis).read_batch(mk, "w2", 10)
        assert batch is not None and batch.counts == [1] * 5
