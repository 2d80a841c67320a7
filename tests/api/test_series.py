"""GET /v1/models/{id}/series: the trainer's points through the API, tenant-scoped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
from starlette.testclient import TestClient

from app.api.context import ApiContext
from app.main import create_app
from app.settings import Settings
from app.worker_settings import WorkerSettings
from tests.api.conftest import ADMIN_TOKEN, new_model, new_tenant, predict_all
from workers.worker import Worker


@pytest.fixture
def client(recording_client: TestClient) -> TestClient:
    """Every test here watches the series: the trainer records a point per batch."""
    return recording_client


@pytest.mark.slow
def test_series_shows_the_points_of_the_callers_model_only(client: TestClient) -> None:
    auth = new_tenant(client, "acme")
    other = new_tenant(client, "globex")
    new_model(client, auth)
    rng = np.random.default_rng(0)
    for _ in range(3):  # three batches apart: the trainer applies each before the next
        preds = predict_all(client, auth, rng.standard_normal((50, 4)))
        events = [{"event_id": p["event_id"], "click": bool(i % 2)} for i, p in enumerate(preds)]
        assert client.post("/v1/models/m1/feedback", json={"events": events},
                           headers=auth).json()["accepted"] == 50
        assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200
    # a point once the trainer finds the model idle (or with the next batch, if that came
    # first): the last one is written after the sync, within a pass
    _until(lambda: client.get("/v1/models/m1/series?limit=1", headers=auth).json()["points"]
           [-1]["events_applied"] == 150, "no point at 150")
    r = client.get("/v1/models/m1/series", headers=auth)
    assert r.status_code == 200, r.text
    points = r.json()["points"]
    applied = [p["events_applied"] for p in points]
    assert applied == sorted(set(applied)) and set(applied) <= {50, 100, 150}
    assert points[-1]["online_reward"] == pytest.approx(0.5)
    assert points[-1]["noise_source"] == "initial" and points[-1]["rho0"] is not None
    assert [p["events_applied"] for p in client.get(
        "/v1/models/m1/series?limit=1", headers=auth).json()["points"]] == [150]
    r = client.get("/v1/models/m1/series", headers=other)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    r = client.get("/v1/models/m1/series?limit=0", headers=auth)
    assert r.status_code == 422 and "limit" in r.text


#: Seconds between points and between kept versions in the burst test: longer than a burst.
BURST_INTERVAL = 3.0


async def run_slow_trainer(ctx: ApiContext, stop: asyncio.Event) -> None:
    """The trainer with a point every :data:`BURST_INTERVAL` seconds."""
    settings = WorkerSettings(roles=("trainer",), worker_id="burst-tests", flush_interval=0.01,
                              nrest_threads=True, series_interval=BURST_INTERVAL)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


def _burst(client: TestClient, auth: dict[str, str], rng: np.random.Generator) -> int:
    """Feedback for 40 decisions, applied (well within one interval); the model's total."""
    preds = predict_all(client, auth, rng.standard_normal((40, 4)))
    events = [{"event_id": p["event_id"], "click": bool(i % 3)} for i, p in enumerate(preds)]
    assert client.post("/v1/models/m1/feedback", json={"events": events},
                       headers=auth).json()["accepted"] == 40
    assert client.post("/v1/models/m1/sync", headers=auth).status_code == 200
    applied: int = client.get("/v1/models/m1", headers=auth).json()["stats"]["events_applied"]
    return applied


def _until(check: Callable[[], bool], what: str) -> None:
    """Wait for ``check()`` (every 0.1 s, at most ten intervals: the condition is due within
    one)."""
    deadline = time.monotonic() + 10 * BURST_INTERVAL
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_a_short_burst_ends_in_a_point_and_a_kept_version(redis_url: str) -> None:
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN),
                     background=[run_slow_trainer])
    with TestClient(app) as client:
        auth = new_tenant(client, "acme")
        new_model(client, auth, versions={"kept": 20, "interval_seconds": BURST_INTERVAL})
        rng = np.random.default_rng(1)

        def last_point() -> dict[str, Any] | None:
            points = client.get("/v1/models/m1/series", headers=auth).json()["points"]
            return points[-1] if points else None

        def kept_at(applied: int) -> bool:
            kept = client.get("/v1/models/m1/versions", headers=auth).json()["versions"]
            return any(v["reason"] == "trainer" and v["events_applied"] == applied
                       for v in kept)

        # a model's first point comes early: its first burst gets one
        first = _burst(client, auth, rng)
        _until(lambda: (last_point() or {}).get("events_applied") == first, "no first point")
        # a later burst, shorter than the interval: its end is a point and a kept version
        total = _burst(client, auth, rng)
        assert total == first + 40
        _until(lambda: (last_point() or {}).get("events_applied") == total,
               f"the series stops before {total}: {last_point()}")
        _until(lambda: kept_at(total), "no version of the burst's end is kept")
        point = last_point()
        assert point is not None and point["events"] == 40
        assert point["version"] == client.get("/v1/models/m1", headers=auth).json()["version"]


def _point(t: float) -> dict[str, Any]:
    return {"t": t, "version": 1, "events_applied": int(t), "events": 1,
            "events_per_second": 1.0, "online_reward": None, "calibrated_reward": None,
            "debiased_reward": None, "rho0": None, "rho1": None, "noise_source": None,
            "rho0_interval": None, "rho1_interval": None, "pending": 0, "backlog": 0}


def test_a_series_past_the_byte_bound_comes_back_cut_with_the_next_before(
        redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.store import paging, series
    from app.store.keys import ModelKeys
    from tests.api.conftest import follow_pages, make_client

    with make_client(redis_url, trainer=False) as client:
        auth = new_tenant(client, "acme")
        new_model(client, auth)
        store = client.app.state.ctx.store
        for t in range(1, 31):
            client.portal.call(store.series.append, ModelKeys("acme", "m1"), _point(float(t)))
        whole = client.get("/v1/models/m1/series", headers=auth).json()
        assert len(whole["points"]) == 30 and whole["next_before"] is None
        size = len(orjson.dumps(_point(10.0)))  # each stored point about as large
        bound = 4 * size + 20
        monkeypatch.setattr(paging, "MAX_PAGE_BYTES", bound)
        monkeypatch.setattr(series, "POINTS_PER_READ", 7)
        pages = follow_pages(client, "/v1/models/m1/series", auth, "next_before", "before")
        assert all(0 < len(page["points"]) <= 4 for page in pages)  # cut by bytes, not limit
        seen = [p for page in pages[::-1] for p in page["points"]]
        assert seen == whole["points"] and len(pages) == 8  # every point once, oldest first
        newest = client.get("/v1/models/m1/series", params={"limit": 2}, headers=auth).json()
        assert [p["t"] for p in newest["points"]] == [29.0, 30.0]
        assert newest["next_before"] == 29.0
