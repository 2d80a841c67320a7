"""The trainer's drift step: a fall of a model's reward is detected, saved and reported."""

from __future__ import annotations

from app.store import Store
from tests.workers.conftest import create_model, feed_clicks, model_config
from tests.workers.test_trainer import worker


async def test_trainer_reports_a_fall_of_the_reward(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    assert await store.drift.report(mk) is None
    await feed_clicks(store, mk, config, 1_500, 0.9, seed=1)
    first = worker(store, batch_size=500)
    assert await first.drain() == 1_500
    report = await store.drift.report(mk)
    assert report is not None
    assert (report["status"], report["detections"], report["events"]) == ("stable", 0, 1_500)
    assert report["signal"] == "reward" and report["threshold"] > 0
    # a second worker (no cached detector) carries on from the saved state
    await feed_clicks(store, mk, config, 1_500, 0.1, seed=2)
    second = worker(store, "w2", batch_size=500)
    assert await second.drain() == 1_500
    report = await store.drift.report(mk)
    assert report is not None
    assert (report["status"], report["detections"]) == ("drift", 1)
    assert 1_500 < report["detected_at_event"] <= 1_700 and report["detected_at"] > 0
    labels = {"tenant": "t", "model": "m"}
    assert second.metrics.registry.get_sample_value(
        "noisyloop_drift_detections_total", labels) == 1.0


async def test_deleting_the_model_deletes_its_detector(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed_clicks(store, mk, config, 200, 0.5, seed=3)
    assert await worker(store).drain() == 200
    assert await store.drift.report(mk) is not None
    await store.models.delete("t", "m")
    assert await store.drift.report(mk) is None
