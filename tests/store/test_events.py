"""The store's atomic steps against a real Redis: exactly-once join, expiry, publish, skip."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from app.learners.config import ModelConfig
from app.store import ModelKeys, Store
from app.store.codec import decode, encode
from app.store.delivery import DeliveryStore, unpack_entry
from app.store.events import DecisionGuard
from app.store.keys import api_key
from app.store.leases import LeaseStore
from app.store.models import ModelView
from app.store.snapshots import PublishConflict
from app.store.tenants import KeyRecord, parse_api_key
from app.worker_settings import WorkerSettings
from tests.deadlines import pass_deadlines_async
from workers.worker import Worker

CONFIG = ModelConfig.of({
    "model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 2, "n_classes": 3,
    "params": {"gamma": 0.05, "rho0": 0.0, "rho1": 0.0},
    "feedback": {"wait_seconds": 60, "on_timeout": "no_click"}, "seed": 0, "uid": "u1"})
CTX = {"x": np.array([1.0, 0.0]), "greedy": np.array(0), "played": np.array(1),
       "prob": np.array(0.5)}
CLICK = {"click": np.array(1.0)}


@pytest.fixture
async def store(redis_url: str):
    s = Store.from_url(redis_url)
    await s.tenants.create("t")
    await s.models.create("t", CONFIG, {"W_": np.zeros((3, 2)), "noise_rates_": np.zeros(2)},
                          0.0, 0.0)
    yield s
    await s.close()


MK = ModelKeys("t", "m")


async def stream_entries(store: Store) -> list[tuple[str, dict[bytes, bytes]]]:
    """The model's event stream as ``(stream id, fields)``, oldest first."""
    return [(sid.decode(), fields) for sid, fields in await store.redis.xrange(MK.events)]


async def expire(store: Store, event_id: str, mode: str = "no_click") -> str:
    """The sweeper's step on one decision."""
    default = {"click": np.array(0.0)} if mode == "no_click" else {}
    [outcome] = await store.events.expire_many(MK, [event_id], mode, default)
    return outcome


def _trainer(store: Store, worker_id: str) -> Worker:
    return Worker(store, WorkerSettings(roles=("trainer",), worker_id=worker_id,
                                        nrest_threads=True))


def test_codec_roundtrip_shapes_and_dtypes() -> None:
    arrays = {"a": np.arange(6, dtype=np.int32).reshape(2, 3), "b": np.array(2.5),
              "c": np.zeros((0, 4))}
    out = decode(encode(arrays))
    for name, arr in arrays.items():
        assert out[name].dtype == arr.dtype and out[name].shape == arr.shape
        np.testing.assert_array_equal(out[name], arr)


async def test_take_feedback_exactly_once_under_concurrency(store: Store) -> None:
    await store.events.record_decisions(MK, [("e1", CTX)], 60, 60)
    outcomes = await asyncio.gather(*(store.events.take_feedback(MK, "e1", CLICK)
                                      for _ in range(20)))
    statuses = sorted(o.status for o in outcomes)
    assert statuses == ["duplicate"] * 19 + ["ok"]
    assert len(await stream_entries(store)) == 1


async def test_take_feedback_many_joins_in_order_in_one_call(store: Store) -> None:
    await store.events.record_decisions(MK, [("e1", CTX), ("e2", CTX)], 60, 60)
    outcomes = await store.events.take_feedback_many(
        MK, [("e1", CLICK), ("nope", CLICK), ("e2", {"click": np.array(0.0)}), ("e1", CLICK)])
    assert [o.status for o in outcomes] == ["ok", "unknown", "ok", "duplicate"]
    assert [o.stream_id is not None for o in outcomes] == [True, False, True, False]
    # one stream entry for the batch's joined events, packed in order
    [(sid, fields)] = await stream_entries(store)
    assert sid == outcomes[0].stream_id == outcomes[2].stream_id
    assert fields[b"k"] == b"feedback" and fields[b"n"] == b"2"
    events, contexts, feedbacks = unpack_entry(fields[b"n"], fields[b"L"],
                                               [fields[b"e"], fields[b"c"], fields[b"f"]])
    assert events == [b"e1", b"e2"] and contexts == [encode(CTX)] * 2
    assert [decode(f)["click"].item() for f in feedbacks] == [1.0, 0.0]
    assert (await store.models.record("t", "m")).feedback_accepted == 2  # type: ignore[union-attr]
    assert await store.events.take_feedback_many(MK, []) == []


async def test_a_batch_longer_than_the_joins_read_chunk_keeps_every_status(
        store: Store) -> None:
    """The join reads a batch's contexts and deadlines in chunks of 1,000: statuses past the
    first chunk, and a repeat of an event joined in another chunk, are as one at a time."""
    logged = [(f"e{i}", {**CTX, "played": np.array(i % 3)}) for i in range(1500)]
    await store.events.record_decisions(MK, logged[:1400], 60, 60)
    await store.events.record_decisions(MK, logged[1400:], 60, 60, defer=True)
    batch = [(eid, CLICK) for eid, _ in logged] + [("e5", CLICK), ("e1200", CLICK)]
    outcomes = await store.events.take_feedback_many(MK, batch)
    assert [o.status for o in outcomes] == (["ok"] * 1400 + ["not_activated"] * 100
                                            + ["duplicate"] * 2)
    [(_, fields)] = await stream_entries(store)
    events, contexts, _ = unpack_entry(fields[b"n"], fields[b"L"],
                                       [fields[b"e"], fields[b"c"], fields[b"f"]])
    assert events == [eid.encode() for eid, _ in logged[:1400]]
    assert [decode(c)["played"].item() for c in contexts] == [i % 3 for i in range(1400)]
    assert await store.redis.zcard(MK.pending) == 0
    again = await store.events.take_feedback_many(MK, [("e1399", CLICK), ("e1450", CLICK)])
    assert [o.status for o in again] == ["duplicate", "not_activated"]


async def test_expired_decision_refuses_feedback_and_ends_once(store: Store) -> None:
    await store.events.record_decisions(MK, [("e1", CTX), ("e2", CTX)], 1, 60)
    assert await expire(store, "e1") == "not_due"
    assert await pass_deadlines_async(store.redis, MK) == 2
    now = await store.events.server_time()
    assert sorted(await store.events.due_decisions(MK, now)) == ["e1", "e2"]
    assert (await store.events.take_feedback(MK, "e1", CLICK)).status == "unknown"
    assert await expire(store, "e1") == "expired"
    assert await expire(store, "e1") == "gone"
    assert await expire(store, "e2", "drop") == "expired"
    entries = await stream_entries(store)
    assert len(entries) == 1 and entries[0][1][b"k"] == b"timeout"
    info = await store.snapshots.info(MK)
    assert info is not None and info.events_expired == 2


async def test_publish_refuses_stale_version_and_foreign_lease(store: Store) -> None:
    state = {"W_": np.ones((3, 2)), "noise_rates_": np.zeros(2)}
    assert await store.snapshots.publish(MK, state, expected_version=1, last_id="5-0",
                                         applied=3) == 2
    with pytest.raises(PublishConflict):
        await store.snapshots.publish(MK, state, expected_version=1)
    await store.redis.set(MK.lease, "other")
    with pytest.raises(PublishConflict):
        await store.snapshots.publish(MK, state, lease_owner="me")
    snap = await store.snapshots.load(MK)
    assert snap is not None and snap.info.last_id == "5-0" and snap.info.events_applied == 3


async def test_the_failure_record_goes_as_a_succeeded_batch_is_marked_handled(
        store: Store) -> None:
    """A sync returns once the batch is handled: the failure must be gone by then, and only
    when the step went through (its after-publish steps may still fail after the publish,
    which keeps the record)."""
    state = {"W_": np.ones((3, 2)), "noise_rates_": np.zeros(2)}
    await store.failures.report(MK, "CodecError: not a noisyloop array blob")
    await store.redis.set(MK.lease, "me")
    await store.snapshots.publish(MK, state, last_id="5-0", applied=1, lease_owner="me")
    assert await store.failures.read(MK) is not None
    delivery = DeliveryStore(store.redis)
    await delivery.ack_and_trim(MK, [], "5-0", handled=True)
    assert await store.failures.read(MK) is not None
    await delivery.ack_and_trim(MK, [], "5-0", handled=True, succeeded=True)
    assert await store.failures.read(MK) is None


async def test_trainer_skips_entries_already_in_snapshot(store: Store) -> None:
    """A crash between publish and ack re-delivers entries; they must not apply twice."""
    await store.events.record_decisions(MK, [("e1", CTX), ("e2", CTX)], 60, 60)
    await store.events.take_feedback(MK, "e1", CLICK)
    assert await _trainer(store, "c1").drain() == 1
    w1 = (await store.snapshots.load(MK)).state["W_"].copy()
    # simulate the crash: the same entry is delivered again (un-acked, then re-read)
    stream_id = (await store.redis.xrange(MK.events))[0][0]
    await store.redis.xgroup_setid(MK.events, "trainers", "0")
    assert await _trainer(store, "c2").drain() == 0
    np.testing.assert_array_equal((await store.snapshots.load(MK)).state["W_"], w1)
    assert stream_id
    await store.events.take_feedback(MK, "e2", CLICK)
    assert await _trainer(store, "c2").drain() == 1
    info = await store.snapshots.info(MK)
    assert info.events_applied == 2 and info.version == 3


async def test_view_with_key_checks_tenant_and_secret(store: Store) -> None:
    key, key_id = await store.tenants.create_key("t")
    record, view = await store.models.view_with_key(key, "m")
    assert record is not None and view is not None and view.version == 1
    assert (record.tenant, record.key_id) == ("t", key_id)
    parsed = parse_api_key(key)
    assert parsed is not None and record.verifies(parsed)
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert await store.models.view_with_key(wrong, "m") == (None, None)
    assert (await store.models.view_with_key(key, "nope"))[1] is None


async def test_no_lease_for_a_deleted_model(store: Store) -> None:
    """A trainer that found the model just before its deletion takes no lease (and leaves
    no key behind)."""
    leases = LeaseStore(store.redis)
    assert await leases.take_many([MK], "w1", 10_000) == [True]
    assert await store.models.delete("t", "m")
    assert await leases.take_many([MK], "w1", 10_000) == [False]
    assert await store.redis.exists(MK.lease) == 0


async def test_a_deleted_model_leaves_no_client_event_id_behind(store: Store) -> None:
    """A client's event id (and a reward kept for it) goes with its model: a model made again
    under the same id can take the same event id at once."""
    assert await store.aliases.claim(MK, "client-1", 600)
    assert await store.aliases.keep_reward(MK, "client-1", {"news": 1.0}, 600)
    assert await store.models.delete("t", "m")
    assert await store.redis.keys(f"{MK.tag}:*") == []
    await store.models.create("t", CONFIG, {"W_": np.zeros((3, 2)),
                                            "noise_rates_": np.zeros(2)}, 0.0, 0.0)
    assert await store.aliases.claim(MK, "client-1", 600)


async def _guarded_setup(store: Store) -> tuple[KeyRecord, ModelView]:
    key, _ = await store.tenants.create_key("t")
    record, view = await store.models.view_with_key(key, "m")
    assert record is not None and view is not None
    return record, view


async def _log_guarded(store: Store, guard: DecisionGuard, eid: str = "g1") -> int | None:
    return await store.events.record_decisions(MK, [(eid, CTX)], 60, 60, guard=guard)


async def test_guarded_log_writes_while_key_and_model_are_unchanged(store: Store) -> None:
    record, view = await _guarded_setup(store)
    deadline = await _log_guarded(store, DecisionGuard(record, view.stamp))
    assert deadline is not None
    assert await store.redis.zscore(MK.pending, "g1") == deadline
    assert decode(await store.redis.get(MK.context("g1")))["played"] == 1
    assert await store.redis.hget(MK.stats, "predictions") == b"1"


async def test_guarded_log_counts_unlogged_predictions(store: Store) -> None:
    record, view = await _guarded_setup(store)
    guard = DecisionGuard(record, view.stamp)
    assert await store.events.record_decisions(MK, [], 60, 60, predictions=3,
                                               guard=guard) is not None
    assert await store.redis.hget(MK.stats, "predictions") == b"3"
    assert await store.redis.zcard(MK.pending) == 0


def _changes(store: Store, record: KeyRecord) -> dict[str, Any]:
    """Each change that must void a guard, as (name, coroutine factory)."""
    async def revoke() -> None:
        assert await store.tenants.revoke_key("t", record.key_id)

    async def publish() -> None:
        await store.snapshots.publish(MK, {"W_": np.ones((3, 2)), "noise_rates_": np.zeros(2)})

    async def noise() -> None:
        await store.noise.put(MK, 0.1, 0.2, source="configured")

    async def estimator() -> None:  # the status changes, the rates do not
        await store.anchors.configure(MK, estimator="fixed")

    async def config() -> None:
        assert await store.models.update_config(
            "t", CONFIG.model_id, lambda c: c.updated(params={"gamma": 0.1}))

    async def recreate() -> None:
        assert await store.models.delete("t", "m")
        await store.models.create("t", CONFIG.updated(uid="u2"),
                                  {"W_": np.zeros((3, 2)), "noise_rates_": np.zeros(2)}, 0.0, 0.0)

    async def forge_tenant() -> None:
        await store.redis.hset(api_key(record.key_id), "tenant", "other")

    return {"revoke": revoke, "publish": publish, "noise": noise, "estimator": estimator,
            "config": config, "recreate": recreate, "tenant": forge_tenant}


@pytest.mark.parametrize("change", ["revoke", "publish", "noise", "estimator", "config",
                                    "recreate", "tenant"])
async def test_guarded_log_writes_nothing_after_a_change(store: Store, change: str) -> None:
    record, view = await _guarded_setup(store)
    await _changes(store, record)[change]()
    before = await store.redis.hget(MK.stats, "predictions")
    assert await _log_guarded(store, DecisionGuard(record, view.stamp)) is None
    assert await store.redis.exists(MK.context("g1")) == 0
    assert await store.redis.zscore(MK.pending, "g1") is None
    assert await store.redis.hget(MK.stats, "predictions") == before
    # the view read after the change guards again (except for a revoked or forged key)
    fresh = await store.models.view("t", "m")
    assert fresh is not None
    if change not in ("revoke", "tenant"):
        assert await _log_guarded(store, DecisionGuard(record, fresh.stamp), "g2") is not None
