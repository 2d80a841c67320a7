"""Kept versions against a real Redis: interval, cap, and a rollback across a config change."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from app.learners.config import ModelConfig
from app.store import ModelKeys, Store, versions
from app.store.client import run_script
from app.store.codec import decode
from app.store.results import ScriptResult
from app.store.versions import RollbackRefused, VersionPolicy

CONFIG = ModelConfig.of({"model_id": "m", "task": "label", "algorithm": "rcnbf",
                         "n_features": 2, "n_classes": 3, "params": {"gamma": 0.05}, "seed": 0,
                         "uid": "u1"})
MK = ModelKeys("t", "m")


@pytest.fixture
async def store(redis_url: str):
    s = Store.from_url(redis_url)
    await s.models.create("t", CONFIG, {"W_": np.zeros((3, 2))}, 0.0, 0.0)
    yield s
    await s.close()


def _state(value: float) -> dict[str, np.ndarray]:
    return {"W_": np.full((3, 2), value)}


async def test_keep_waits_out_the_interval_and_drops_the_oldest(store: Store) -> None:
    policy = VersionPolicy(kept=3, interval_seconds=0.2)
    assert await store.versions.keep(MK, policy) == 1
    assert await store.versions.keep(MK, policy) == 0  # kept already
    await store.snapshots.publish(MK, _state(1.0))
    assert await store.versions.keep(MK, policy) == 0  # too soon
    assert await store.versions.keep(MK, policy, expected_version=1, interval=0.0) == 0
    assert await store.versions.keep(MK, policy, reason="import", interval=0.0) == 2
    for value in (2.0, 3.0):
        await asyncio.sleep(0.25)
        version = await store.snapshots.publish(MK, _state(value))
        assert await store.versions.keep(MK, policy) == version
    kept = await store.versions.kept(MK)
    assert [(k.version, k.reason) for k in kept] == [(4, "trainer"), (3, "trainer"),
                                                      (2, "import")]
    assert kept[0].kept_at - kept[1].kept_at >= 0.2
    assert sorted(await store.redis.hkeys(MK.version_states)) == [
        b"c:2", b"c:3", b"c:4", b"s:2", b"s:3", b"s:4"]


async def test_rollback_restores_state_algorithm_and_params(store: Store) -> None:
    policy = VersionPolicy(kept=5, interval_seconds=0.0)
    await store.snapshots.publish(MK, _state(1.0))
    assert await store.versions.keep(MK, policy) == 2
    # a promote-like change: another algorithm with its own state
    await store.models.update_config(
        "t", "m", lambda c: c.updated(algorithm="other", params={"a": 1}))
    await store.snapshots.publish(MK, {"V": np.ones(4)})
    assert await store.versions.rollback(MK, 2) == 4
    snap = await store.snapshots.load(MK)
    assert snap is not None and snap.version == 4
    np.testing.assert_array_equal(snap.state["W_"], _state(1.0)["W_"])
    config = await store.models.config("t", "m")
    assert config is not None
    assert (config.algorithm, config.params, config.uid) == ("rcnbf", {"gamma": 0.05}, "u1")
    assert decode(await store.redis.hget(MK.version_states, "s:2"))["W_"][0, 0] == 1.0
    # the replaced state and the new version are kept in the rollback's step
    assert [(k.version, k.reason) for k in await store.versions.kept(MK)] == [
        (4, "rollback"), (3, "before rollback"), (2, "trainer")]
    assert "V" in decode(await store.redis.hget(MK.version_states, "s:3"))
    with pytest.raises(RollbackRefused) as refused:
        await store.versions.rollback(MK, 1)
    assert refused.value.code is ScriptResult.NOT_KEPT


async def test_rollback_is_refused_when_a_promotion_lands_after_its_read(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rollback read the config (the kept version's algorithm: nothing to restore), then
    a promotion set another algorithm and its state: publishing the kept state under the
    promoted config would pair a state with another algorithm's config."""
    policy = VersionPolicy(kept=5, interval_seconds=0.0)
    assert await store.versions.keep(MK, policy) == 1
    promoted = CONFIG.updated(algorithm="other", params={"a": 1})

    async def promote_first(*args: Any) -> Any:
        await store.models.update_config("t", "m", lambda _: promoted)
        await store.snapshots.publish(MK, {"V": np.ones(4)})
        return await run_script(*args)

    monkeypatch.setattr(versions, "run_script", promote_first)
    with pytest.raises(RollbackRefused) as refused:
        await store.versions.rollback(MK, 1)
    assert refused.value.code is ScriptResult.MOVED
    snap = await store.snapshots.load(MK)
    assert snap is not None and snap.version == 2 and "V" in snap.state
    assert await store.models.config("t", "m") == promoted
