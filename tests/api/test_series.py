"""GET /v1/models/{id}/series: the trainer's points through the API, tenant-scoped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest
from starlette.testclient import TestClient

from app.api.context import ApiContext
from app.main import create_app
from app.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, new_model, new_tenant, predict_all
from workers.settings import WorkerSettings
from workers.worker import Worker


async def run_recording_trainer(ctx: ApiContext, stop: asyncio.Event) -> None:
    """The trainer with a point after every batch but the first."""
    settings = WorkerSettings(roles=("trainer",), worker_id="series-tests", flush_interval=0.01,
                              nrest_threads=True, batch_size=50, series_interval=1e-9)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN),
                     background=[run_recording_trainer])
    with TestClient(app) as c:
        yield c


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
    r = client.get("/v1/models/m1/series", headers=auth)
    assert r.status_code == 200, r.text
    points = r.json()["points"]
    assert [p["events_applied"] for p in points] == [100, 150]
    assert points[-1]["online_reward"] == pytest.approx(0.5)
    assert points[-1]["noise_source"] == "initial" and points[-1]["rho0"] is not None
    assert [p["events_applied"] for p in client.get(
        "/v1/models/m1/series?limit=1", headers=auth).json()["points"]] == [150]
    r = client.get("/v1/models/m1/series", headers=other)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    r = client.get("/v1/models/m1/series?limit=0", headers=auth)
    assert r.status_code == 422 and "limit" in r.text
