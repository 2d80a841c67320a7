"""Fixtures of the API tests: the real app (with the in-process trainer) on the test Redis."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

with warnings.catch_warnings():
    # starlette 1.x asks for httpx2 in its TestClient; plain httpx still works.
    # Only that warning is silenced: any other one at import still fails the run.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from app.api.context import ApiContext
from app.main import create_app
from app.settings import Settings
from app.store import Store
from app.worker_settings import WorkerSettings
from workers.worker import Worker

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def run_trainer(ctx: ApiContext, stop: asyncio.Event) -> None:
    settings = WorkerSettings(roles=("trainer",), worker_id="api-tests", flush_interval=0.01,
                              nrest_threads=True)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


def sweep(redis_url: str) -> None:
    """One pass of a sweeper worker over the test Redis: every due decision is defaulted."""
    async def run() -> None:
        store = Store.from_url(redis_url)
        await Worker(store, WorkerSettings(roles=("sweeper",), worker_id="s")).drain()
        await store.close()
    asyncio.run(run())


def make_client(redis_url: str, trainer: bool = True, **settings: Any) -> TestClient:
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN, **settings),
                     background=[run_trainer] if trainer else [])
    return TestClient(app)


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    """The app with a running in-process trainer."""
    with make_client(redis_url) as c:
        yield c


async def run_recording_trainer(ctx: ApiContext, stop: asyncio.Event) -> None:
    """The trainer with a series point after every batch (once the next batch or an idle
    pass comes)."""
    settings = WorkerSettings(roles=("trainer",), worker_id="series-tests", flush_interval=0.01,
                              nrest_threads=True, batch_size=50, series_interval=1e-9)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


@pytest.fixture
def recording_client(redis_url: str) -> Iterator[TestClient]:
    """The app with a running in-process trainer that records a series point per batch."""
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN),
                     background=[run_recording_trainer])
    with TestClient(app) as c:
        yield c


@pytest.fixture
def idle_client(redis_url: str) -> Iterator[TestClient]:
    """The app without a trainer (events stay queued)."""
    with make_client(redis_url, trainer=False) as c:
        yield c


def new_tenant(client: TestClient, tenant: str = "acme") -> dict[str, str]:
    """Create a tenant; return the Authorization header of its key."""
    r = client.post("/v1/admin/tenants", json={"tenant_id": tenant}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def new_model(client: TestClient, auth: dict[str, str], **overrides: Any) -> dict[str, Any]:
    body = {"model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 4,
            "n_classes": 3, "seed": 0, **overrides}
    r = client.post("/v1/models", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()


def predict_all(client: TestClient, auth: dict[str, str], X: np.ndarray,
                explore: bool = True, model: str = "m1") -> list[dict[str, Any]]:
    """Batch-predict every row of ``X`` (1000 instances per request)."""
    out: list[dict[str, Any]] = []
    for i in range(0, len(X), 1000):
        r = client.post(f"/v1/models/{model}/predict",
                        json={"instances": X[i:i + 1000].tolist(), "explore": explore},
                        headers=auth)
        assert r.status_code == 200, r.text
        out += r.json()["predictions"]
    return out


def post_feedback(client: TestClient, auth: dict[str, str], body: Any, model: str = "m1") -> Any:
    """POST one feedback body (single event or batch) and return the response."""
    return client.post(f"/v1/models/{model}/feedback", json=body, headers=auth)


@pytest.fixture
def tenant(client: TestClient) -> dict[str, str]:
    return new_tenant(client)


def follow_pages(client: TestClient, path: str, auth: dict[str, str], cursor: str, param: str,
                 **params: Any) -> list[dict[str, Any]]:
    """Every page of a list route (its JSON), from the first, passing each page's ``cursor``
    as the next request's ``param`` until it is null."""
    pages: list[dict[str, Any]] = []
    at = None
    while True:
        r = client.get(path, params={**params, **({} if at is None else {param: at})},
                       headers=auth)
        assert r.status_code == 200, r.text
        pages.append(r.json())
        at = pages[-1][cursor]
        if at is None:
            return pages
