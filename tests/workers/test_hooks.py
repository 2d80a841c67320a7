"""The trainer's after-publish hooks: each runs on its own, a failing one is reported as a
failed step of its model only, and the batch stays published."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest

from app.store import Store
from tests.workers.conftest import create_model, model_config
from tests.workers.test_trainer import feed, worker
from workers import drift, hooks, trainer
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published
from workers.worker import Worker


def _fails_for(model: str) -> Feature[None]:
    """A feature whose after-publish hook raises for one model."""

    async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
        if slot.ref[1] == model:
            raise RuntimeError("hook broke")

    return Feature("fails", after_publish=after_publish)


async def _worker_failing_for(model: str, store: Store, monkeypatch: pytest.MonkeyPatch
                              ) -> tuple[Worker, WorkerContext]:
    """A started, unpaced trainer whose first after-publish hook fails for ``model``."""
    monkeypatch.setattr(hooks, "FEATURES", (_fails_for(model), *hooks.FEATURES))
    w = worker(store)
    ctx = await w.start()
    ctx.paced = False
    return w, ctx


async def test_a_failing_hook_fails_its_model_step_after_the_other_hooks_ran(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    bad, good = model_config("a-bad"), model_config("b-good")
    mk_bad, mk_good = await create_model(store, bad), await create_model(store, good)
    await feed(store, mk_bad, bad, 20)
    await feed(store, mk_good, good, 10)
    w, ctx = await _worker_failing_for("a-bad", store, monkeypatch)
    try:
        assert await trainer.run_pass(ctx) == 10  # the failing model's step counts nothing
        for mk, n in ((mk_bad, 20), (mk_good, 10)):
            info = await store.snapshots.info(mk)
            assert info is not None and info.events_applied == n  # published
            assert (await store.events.group_progress(mk))[1] == 0  # and acknowledged
            state, report = await store.drift.load(mk)  # the hooks after it ran
            assert state is not None and report is not None and report["events"] == n
        record = await store.models.record("t", "a-bad")
        assert record is not None and record.trainer_failure is not None
        assert record.trainer_failure.error == "RuntimeError: hook broke"
        other = await store.models.record("t", "b-good")
        assert other is not None and other.trainer_failure is None
        assert ctx.metrics.trainer_step_failures._value.get() == 1
    finally:
        await w.close()


async def test_forget_drops_the_model_slot(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 10)
    w = worker(store)
    ctx = await w.start()
    try:
        await trainer.run_pass(ctx)
        ref = (mk.tenant, mk.model)
        slot = ctx.slots[ref]
        assert slot.learner is not None and drift.FEATURE.state(slot).watch is not None
        assert ref in ctx.held
        ctx.forget(ref)
        assert ref not in ctx.slots and ref not in ctx.held
    finally:
        await w.close()


async def test_a_hook_failing_at_every_publish_counts_consecutive_failures(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch is published, then its hook fails: the failure record counts the failed
    steps since the first (its ``since`` kept), not 1 again at each publish; the first step
    whose hooks all go through clears it."""
    config = model_config("a-bad")
    mk = await create_model(store, config)
    w, ctx = await _worker_failing_for("a-bad", store, monkeypatch)
    try:
        since = None
        for step in range(1, 4):
            await feed(store, mk, config, 5, seed=step)
            assert await trainer.run_pass(ctx) == 0
            info = await store.snapshots.info(mk)
            assert info is not None and info.events_applied == 5 * step  # published
            record = await store.models.record("t", "a-bad")
            assert record is not None and record.trainer_failure is not None
            assert record.trainer_failure.failed_steps == step
            since = since or record.trainer_failure.since
            assert record.trainer_failure.since == since
        monkeypatch.setattr(hooks, "FEATURES", hooks.FEATURES[1:])
        await feed(store, mk, config, 5, seed=9)
        assert await trainer.run_pass(ctx) == 5
        record = await store.models.record("t", "a-bad")
        assert record is not None and record.trainer_failure is None
    finally:
        await w.close()


async def test_the_hooks_run_in_the_trainers_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a publish in registry order; after a pass in the reverse order."""
    ran: list[tuple[str, str]] = []

    def recording(feature: Feature[Any]) -> Feature[Any]:
        async def after_publish(ctx: WorkerContext, slot: ModelSlot,
                                published: Published) -> None:
            ran.append(("publish", feature.name))

        async def after_pass(ctx: WorkerContext) -> None:
            ran.append(("pass", feature.name))

        return replace(feature, after_publish=after_publish if feature.after_publish else None,
                       after_pass=after_pass if feature.after_pass else None)

    monkeypatch.setattr(hooks, "FEATURES", tuple(map(recording, hooks.FEATURES)))
    nothing = cast(Any, None)  # the recording hooks read neither
    assert await hooks.run_after_publish(nothing, ModelSlot(("t", "m")), nothing) is None
    await hooks.run_after_pass(nothing)
    assert ran == [("publish", name) for name in (
        "samples", "anchors", "versions", "series", "drift", "challengers", "autooptimize")] + [
        ("pass", "series"), ("pass", "versions")]


def test_every_feature_has_its_own_name_and_a_hook() -> None:
    names = [feature.name for feature in hooks.FEATURES]
    assert len(set(names)) == len(names) == 7
    assert all(f.after_publish or f.after_pass for f in hooks.FEATURES)
