"""The trainer's quality series on a real Redis: windows, point fields, the cap, on/off."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.proxy import calibrated_probability
from app.store import ModelKeys, Store
from app.store.series import SeriesContext
from app.store.snapshots import SnapshotInfo
from tests.workers.conftest import create_model, model_config
from tests.workers.test_trainer import feed, worker
from workers.series import ModelSeries, Window, make_point


def test_model_series_closes_a_window_once_it_is_interval_old() -> None:
    series = ModelSeries()
    # the model's first window closes early, the next ones after the interval
    assert series.add(10.0, 5, 2.0, 5, now=100.0) is None
    assert series.add(10.0, 3, 1.0, 3, now=101.0) == Window(100.0, 8, 3.0, 8)
    assert series.add(10.0, 2, 0.0, 2, now=105.0) is None
    closed = series.add(10.0, 2, 1.0, 2, now=111.0)
    assert closed == Window(101.0, 4, 1.0, 4)
    assert series.window == Window(111.0)  # a new window opened


def test_model_series_closes_a_window_once_it_holds_max_events() -> None:
    series = ModelSeries()
    series.add(10.0, 1, 1.0, 1, now=0.0)
    series.add(10.0, 1, 1.0, 1, now=1.0)  # the first window closed
    # a burst: 24 batches of 100 within 2 s close a window every 1,000 events, not once
    closed = [w for k in range(24)
              if (w := series.add(10.0, 100, 50.0, 100, now=1.0 + k / 12, max_events=1000))]
    assert [w.events for w in closed] == [1000, 1000]
    assert series.window is not None and series.window.events == 400
    # a batch larger than max_events is one point
    assert series.add(10.0, 5000, 0.0, 5000, now=3.5, max_events=1000) == Window(
        1.0 + 19 / 12, 5400, 200.0, 5400)
    # 0: by time only
    assert series.add(10.0, 5000, 0.0, 5000, now=4.0, max_events=0) is None


async def test_a_burst_at_the_default_settings_draws_a_point_per_series_events(
        store: Store) -> None:
    """A burst of 4,000 events applied within a series interval: its points are at most
    ``series_events`` apart plus one read (reads of 125 doubling up to 1,000 here), not one
    point for the burst."""
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 4000, per_call=1)
    w = worker(store, batch_size=125)
    assert (w.config.series_interval, w.config.series_events) == (10.0, 1000)  # defaults
    assert await w.drain() == 4000
    points = await store.series.read(mk)
    assert len(points) >= 3, [p["events_applied"] for p in points]
    assert all(p["events"] <= 1000 + 1000 - 1 for p in points), [p["events"] for p in points]
    assert points[-1]["events_applied"] >= 4000 - 1999


def test_model_series_closes_the_due_window_of_a_model_gone_idle() -> None:
    busy, quiet = ModelSeries(), ModelSeries()
    for series in (busy, quiet):
        series.add(10.0, 1, 1.0, 1, now=0.0)
        series.add(10.0, 1, 1.0, 1, now=1.0)  # first windows closed
        series.add(10.0, 7, 2.0, 7, now=2.0)
    assert busy.idle(now=5.0) is None and quiet.idle(now=5.0) is None  # both learned
    busy.add(10.0, 1, 0.0, 1, now=10.5)
    # quiet applied nothing since, and its window is due: closed with the burst's counts;
    # busy learned in the pass (its next batch closes its window)
    assert quiet.idle(now=11.5) == Window(1.0, 7, 2.0, 7) and busy.idle(now=11.5) is None
    assert quiet.window is None and busy.window is not None
    assert busy.idle(now=30.0) == Window(1.0, 8, 2.0, 8)
    busy.add(10.0, 0, 0.0, 0, now=30.0)
    assert busy.idle(now=30.0) is None
    assert busy.idle(now=50.0) is None and busy.window is None  # an empty window is dropped


def test_point_without_clicks_or_noise_rates_has_nulls() -> None:
    p = make_point(Window(0.0, 4), 2.0, SnapshotInfo(2, "1-0", 4, 0, 0.0, 0, None),
                   (0.0, 0.0), None, SeriesContext(0, 3, None))
    assert p["online_reward"] is None and p["calibrated_reward"] is None
    assert p["rho0"] is None and p["rho0_interval"] is None
    assert (p["events_per_second"], p["backlog"]) == (2.0, 3)


async def test_trainer_records_points_with_rewards_rates_and_a_cap(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    events = await feed(store, mk, config, 300, per_call=1)
    # reads of 64, 128 and 108; the first batch opens the window, each later one (older than
    # the tiny interval) closes it
    w = worker(store, batch_size=64, series_interval=1e-9)
    assert await w.drain() == 300
    points = await store.series.read(mk)
    assert [p["events"] for p in points] == [192, 108]
    assert [p["events_applied"] for p in points] == [192, 300]
    assert [p["version"] for p in points] == [3, 4]
    clicks = np.array([float(e["click"]) for e in events])
    last = points[-1]
    assert last["online_reward"] == pytest.approx(clicks[192:].mean(), abs=1e-6)
    assert last["calibrated_reward"] == pytest.approx(
        calibrated_probability(clicks[192:].mean(), 0.1, 0.2), abs=1e-6)
    assert last["debiased_reward"] == pytest.approx(
        calibrated_probability(clicks.mean(), 0.1, 0.2), abs=1e-6)
    assert (last["rho0"], last["rho1"], last["noise_source"]) == (0.1, 0.2, "initial")
    assert last["rho0_interval"] is None  # initial rates have no interval
    assert "position_bias" not in last  # a label model has none (rank models: their theta)
    assert last["pending"] == 0 and points[0]["t"] <= last["t"]
    labels = {"tenant": "t", "model": "m"}
    assert w.metrics.registry.get_sample_value("noisyloop_online_reward", labels) \
        == pytest.approx(last["online_reward"])
    assert w.metrics.registry.get_sample_value("noisyloop_calibrated_reward", labels) \
        == pytest.approx(last["calibrated_reward"])
    for _ in range(5):
        await store.series.append(mk, {"t": 0}, cap=4)
    assert len(await store.series.read(mk)) == 4
    assert len(await store.series.read(mk, limit=2)) == 2


async def test_series_interval_zero_records_nothing(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await feed(store, mk, config, 50)
    assert await worker(store, series_interval=0).drain() == 50
    assert await store.series.read(mk) == []


async def test_estimated_rates_carry_the_anchor_interval(store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    await store.noise.put(mk, 0.12, 0.18, source="estimated", n_samples=1000)
    await store.anchors.record(mk, {"status": "published", "interval": {
        "level": 0.95, "rho0": [0.1, 0.14], "rho1": [0.15, 0.21]}})
    await feed(store, mk, config, 20)
    assert await worker(store, batch_size=10, series_interval=1e-9).drain() == 20
    (point,) = await store.series.read(mk)
    assert (point["rho0"], point["rho1"], point["noise_source"]) == (0.12, 0.18, "estimated")
    assert point["rho0_interval"] == [0.1, 0.14] and point["rho1_interval"] == [0.15, 0.21]


async def test_deleting_the_model_deletes_its_series(store: Store) -> None:
    mk: ModelKeys = await create_model(store, model_config())
    await store.series.append(mk, {"t": 1})
    await store.models.delete("t", "m")
    assert await store.series.read(mk) == []
