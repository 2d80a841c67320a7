"""``drift.action``: a detection marked in the log, a recovery as a kept version, exactly once;
a reset or rollback restarts the detector."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.store import ModelKeys, Store
from app.store.decisionlog import LogEntry
from app.store.versions import VersionPolicy
from tests.workers.conftest import create_model, feed_clicks, model_config
from tests.workers.test_trainer import worker


async def _log(store: Store, mk: ModelKeys) -> list[LogEntry]:
    return await store.log.read(mk, count=10_000)


def _markers(entries: list[LogEntry]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.fields[b"m"].decode(), orjson.loads(e.fields[b"d"])) for e in entries
            if e.is_marker]


def _logged_ids(entries: list[LogEntry]) -> list[str]:
    """The logged events' ids (the events of one feedback batch share a stream id)."""
    return [ev.event_id for e in entries for ev in e.events()]


async def _fall(store: Store, mk: ModelKeys, config: dict) -> list[dict[str, np.ndarray]]:
    """1,500 events at a click rate of 0.9, then 1,500 at 0.1, applied in batches of 500."""
    events = await feed_clicks(store, mk, config, 1_500, 0.9, seed=1)
    events += await feed_clicks(store, mk, config, 1_500, 0.1, seed=2)
    assert await worker(store, batch_size=500).drain() == 3_000
    return events


async def test_recover_refits_on_the_events_since_the_change_as_a_kept_version(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await _fall(store, mk, config)
    report = await store.drift.report(mk)
    assert report is not None and report["detections"] == 1
    detection = report["history"][0]
    assert detection["action"] == "recover" and 1 <= detection["since"] <= 300
    entries = await _log(store, mk)
    markers = _markers(entries)
    assert [name for name, _ in markers] == ["drift", "drift_recovery"]
    recovered = markers[1][1]
    assert recovered["version"] == detection["recovered_version"]
    assert recovered["relearned"] == detection["since"]
    # exactly once: every event applied and logged once, across the recovery
    ids = _logged_ids(entries)
    assert len(ids) == len(set(ids)) == 3_000
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 3_000
    # the model is a fresh one that learned the events since the change, then the rest
    first_marker = next(i for i, e in enumerate(entries) if e.is_marker)
    at_recovery = sum(e.size for e in entries[:first_marker])
    learner = build_learner(config)
    learner.learn_many(stack_events(events[at_recovery - recovered["relearned"]:]))
    for name, value in learner.get_state().items():
        np.testing.assert_allclose(snap.state[name], value, rtol=1e-9, atol=1e-12,
                                   err_msg=name)
    reasons = {k.reason: k.version for k in await store.versions.kept(mk)}
    assert reasons["drift recovery"] == recovered["version"]
    assert reasons["before drift recovery"] == recovered["version"] - 1
    # a rollback undoes it; events after it apply once, on top of the version rolled back to
    rolled = await store.versions.rollback(mk, reasons["before drift recovery"])
    await feed_clicks(store, mk, config, 300, 0.1, seed=3)
    assert await worker(store, batch_size=500).drain() == 300
    entries = await _log(store, mk)
    ids = _logged_ids(entries)
    assert len(ids) == len(set(ids)) == 3_300
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 3_300 and snap.version == rolled + 1


async def test_alert_marks_the_detection_and_keeps_the_model(store: Store) -> None:
    config = model_config(drift={"action": "alert"})
    mk = await create_model(store, config)
    await _fall(store, mk, config)
    report = await store.drift.report(mk)
    assert report is not None and report["detections"] == 1
    assert report["history"][0]["action"] == "alert"
    assert "drift recovery" not in {k.reason for k in await store.versions.kept(mk)}
    assert [name for name, _ in _markers(await _log(store, mk))] == ["drift"]


async def test_a_model_that_does_not_learn_is_alerted_not_refitted(store: Store) -> None:
    """A logging-only model keeps its weights: a detection under ``recover`` only alerts."""
    config = model_config(mode="logging")
    mk = await create_model(store, config)
    initial = build_learner(config).get_state()
    await _fall(store, mk, config)
    report = await store.drift.report(mk)
    assert report is not None and report["detections"] == 1
    assert report["history"][0]["action"] == "alert"
    assert "recovered_version" not in report["history"][0]
    assert [name for name, _ in _markers(await _log(store, mk))] == ["drift"]
    snap = await store.snapshots.load(mk)
    assert snap is not None
    for name, value in initial.items():
        np.testing.assert_array_equal(snap.state[name], value, err_msg=name)


async def test_none_runs_no_detector(store: Store) -> None:
    config = model_config(drift={"action": "none"})
    mk = await create_model(store, config)
    await _fall(store, mk, config)
    assert await store.drift.report(mk) is None
    assert _markers(await _log(store, mk)) == []


@pytest.mark.parametrize("change", ["reset", "rollback"])
async def test_a_reset_or_rollback_restarts_the_detector(store: Store, change: str) -> None:
    config = model_config(drift={"action": "alert"})
    mk = await create_model(store, config)
    await _fall(store, mk, config)
    report = await store.drift.report(mk)
    assert report is not None and report["status"] == "drift"
    version = await store.snapshots.version(mk)
    assert version is not None
    if change == "reset":  # as the API's reset publishes
        await store.versions.publish(mk, build_learner(config).get_state(), version,
                                     VersionPolicy(), "reset", "reset")
    else:
        await store.versions.rollback(mk, (await store.versions.kept(mk))[-1].version)
    await feed_clicks(store, mk, config, 300, 0.1, seed=4)
    assert await worker(store, batch_size=500).drain() == 300
    report = await store.drift.report(mk)
    assert report is not None
    # the detector starts afresh on the changed model: the low click rate is its new normal
    assert (report["status"], report["detections"], report["detected_at"]) == (
        "stable", 1, None)
    assert report["version"] == await store.snapshots.version(mk)
