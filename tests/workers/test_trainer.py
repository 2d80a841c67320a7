"""Trainer role in process on a real Redis: batch = learn_many, exactly once, leases, poison."""

from __future__ import annotations

import numpy as np

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.learners.proxy import unbiased_click
from app.store import ModelKeys, Store
from app.store.delivery import DeliveryStore
from app.store.leases import LeaseStore
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, decisions, model_config
from workers import trainer
from workers.worker import Worker


async def feed(store: Store, mk: ModelKeys, config: dict, n: int, seed: int = 0,
               per_call: int | None = None) -> list[dict[str, np.ndarray]]:
    """Log ``n`` decisions and post a click for each, ``per_call`` per feedback batch (one
    stream entry each; default: all in one); return the joined events."""
    logged, clicks = decisions(config, n, seed)
    await store.events.record_decisions(mk, logged, 60, 60)
    items = [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks, strict=True)]
    step = per_call or max(n, 1)
    for start in range(0, n, step):
        outcomes = await store.events.take_feedback_many(mk, items[start:start + step])
        assert all(o.status == "ok" for o in outcomes)
    return [{**ctx, "click": np.array(c)} for (_, ctx), c in zip(logged, clicks, strict=True)]


def expected_state(config: dict, events: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    learner = build_learner(config)
    learner.learn_many(stack_events(events))
    return learner.get_state()


def worker(store: Store, wid: str = "w1", **kwargs: object) -> Worker:
    return Worker(store, WorkerSettings(roles=("trainer",), worker_id=wid, nrest_threads=True,
                                        **kwargs))


async def test_trainer_batches_equal_learn_many_of_all_events(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 250, per_call=1)
    assert await worker(store, batch_size=64).drain() == 250
    snap = await store.snapshots.load(mk)
    assert snap is not None
    for name, arr in expected_state(config, events).items():
        np.testing.assert_allclose(snap.state[name], arr, rtol=1e-12, atol=1e-12)
    # reads of 64, then 128 (a full read doubles the next), then the 58 left
    assert snap.info.events_applied == 250 and snap.version == 1 + 3
    clicks = np.array([float(e["click"]) for e in events])
    assert snap.info.click_n == 250 and snap.info.click_sum == clicks.sum()
    np.testing.assert_allclose(snap.info.debiased_reward(0.1, 0.2),
                               unbiased_click(clicks, 0.1, 0.2).mean(), rtol=1e-12)
    # everything acknowledged and trimmed up to the last applied entry
    assert (await store.events.group_progress(mk))[1] == 0
    assert await store.redis.xlen(mk.events) == 1


async def test_trainer_skips_redelivered_entries_after_crash_between_publish_and_ack(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 30)
    assert await worker(store).drain() == 30
    before = await store.snapshots.load(mk)
    # a crash before XACK: the entries are delivered again
    await store.redis.xgroup_setid(mk.events, "trainers", "0")
    assert await worker(store, "w2").drain() == 0
    after = await store.snapshots.load(mk)
    assert after is not None and before is not None
    assert after.version == before.version and after.info.events_applied == 30
    np.testing.assert_array_equal(after.state["W_"], expected_state(config, events)["W_"])


async def test_trainer_takes_over_a_dead_trainers_pending_entries(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 40, per_call=5)
    # trainer "dead" takes the lease, reads a batch, and dies before publishing
    leases, delivery = LeaseStore(store.redis), DeliveryStore(store.redis)
    assert await leases.take_many([mk], "dead", 100) == [True]
    got = await delivery.read_batch(mk, "dead", 25)
    assert got is not None and len(got) == 25
    # nobody else gets entries while the lease lives
    assert await delivery.read_batch(mk, "w1", 25) is None
    await store.redis.delete(mk.lease)  # the lease expired
    assert await worker(store, batch_size=10).drain() == 40
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 40
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, events)["W_"],
                               rtol=1e-12, atol=1e-12)
    assert (await store.events.group_progress(mk))[1] == 0


async def test_trainer_moves_poison_entries_to_the_dead_letter_stream(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 10)
    await store.redis.xadd(mk.events, {"k": "feedback", "e": "bad", "c": b"junk", "f": b"x"})
    wrong_shape = {**events[0], "x": np.ones(3)}
    from app.store import codec

    await store.redis.xadd(mk.events, {"k": "feedback", "e": "short",
                                       "c": codec.encode({k: v for k, v in wrong_shape.items()
                                                          if k != "click"}),
                                       "f": codec.encode({"click": np.array(1.0)})})
    more = await feed(store, mk, config, 5, seed=1)
    assert await worker(store).drain() == 15
    letters = (await store.dead_letters.page(mk, 100)).items
    reasons = sorted(letter.reason.split(":")[0] for letter in letters)
    assert reasons == ["learner refused the event", "malformed entry"]
    # counted in the stats with the move
    assert (await store.models.record("t", "m")).dead_lettered == 2  # type: ignore[union-attr]
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 15
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, events + more)["W_"],
                               rtol=1e-12, atol=1e-12)
    assert (await store.events.group_progress(mk))[1] == 0


async def test_trainer_dead_letters_entries_delivered_too_often(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 3)
    delivery = DeliveryStore(store.redis)
    await LeaseStore(store.redis).take_many([mk], "w1", 10_000)
    for _ in range(3):  # three deliveries that were never applied
        assert len(await delivery.read_batch(mk, "w1", 10) or []) == 3
    assert await worker(store, max_deliveries=3).drain() == 0
    letters = (await store.dead_letters.page(mk, 100)).items
    assert len(letters) == 3 and letters[0].reason.startswith("delivered 4 times")
    assert [d.deliveries for d in letters] == [4, 4, 4]
    assert (await store.events.group_progress(mk))[1] == 0


async def test_trainer_refetches_after_reset_and_applies_to_the_new_state(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 20)
    assert await worker(store).drain() == 20
    # reset (as the API does: publish initial weights without a last_id)
    await store.snapshots.publish(mk, build_learner(config).get_state())
    events = await feed(store, mk, config, 7, seed=5)
    assert await worker(store).drain() == 7
    snap = await store.snapshots.load(mk)
    assert snap is not None
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, events)["W_"],
                               rtol=1e-12, atol=1e-12)


async def test_leases_share_models_between_live_trainers(store: Store) -> None:
    for i in range(4):
        await create_model(store, model_config(f"m{i}"))
    a, b = worker(store, "a"), worker(store, "b")
    ctx_a, ctx_b = await a.start(), await b.start()
    models = await store.models.all_models()
    await trainer.balance_leases(ctx_a, models)
    assert len(ctx_a.held) == 2  # two live trainers: a fair share is half
    await trainer.balance_leases(ctx_b, models)
    assert len(ctx_b.held) == 2 and not ctx_a.held & ctx_b.held
    await b.close()  # clean shutdown gives the leases back at once
    await ctx_a.heartbeats.forget("b")
    await trainer.balance_leases(ctx_a, models)
    assert len(ctx_a.held) == 4
    await a.close()


async def test_read_batch_gives_fields_and_delivery_counts_also_of_deleted_entries(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 3, per_call=1)
    delivery = DeliveryStore(store.redis)
    await LeaseStore(store.redis).take_many([mk], "w1", 10_000)
    new = await delivery.read_batch(mk, "w1", 10)
    assert new is not None and new.counts == [1, 1, 1]
    raw = await store.redis.xrange(mk.events)
    assert new.stream_ids == [sid.decode() for sid, _ in raw]
    # packed entries of one event each, given as the fields of one event
    assert all(set(fields) == {b"k", b"n", b"L", b"e", b"c", b"f"} for _, fields in raw)
    assert [new.fields(i) for i in range(3)] == [
        {name: fields[name] for name in (b"k", b"e", b"c", b"f")} for _, fields in raw]
    await store.redis.xdel(mk.events, new.stream_ids[1])
    again = await delivery.read_batch(mk, "w1", 10)  # still pending: taken over again
    assert again is not None and again.stream_ids == new.stream_ids
    assert again.counts == [2, 2, 2]
    assert again.fields(1) == {} and again.contexts[1] is None
    assert again.fields(2) == new.fields(2)


async def test_read_size_doubles_after_a_full_read_and_resets_after_a_partial_one(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 100, per_call=1)
    w = worker(store, batch_size=10)
    ctx = await w.start()
    ctx.paced = False  # every pass reads the model, also after an empty read
    ref = (mk.tenant, mk.model)
    try:
        sizes = []
        for _ in range(5):
            await trainer.run_pass(ctx)
            sizes.append(ctx.slots[ref].read_size)
        # reads of 10, 20, 40, 30 (the rest: partial), then 0
        assert sizes == [20, 40, 80, 10, 10]
        for _ in range(5):  # a long backlog: the read size stops at its cap
            await feed(store, mk, config, 200, seed=1)
            await trainer.run_pass(ctx)
        assert ctx.slots[ref].read_size == trainer.MAX_BATCH_GROWTH * 10
    finally:
        await w.close()
