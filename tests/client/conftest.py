"""A real noisyloop service on a free port (uvicorn in a thread, real Redis, in-process trainer).

The client is tested over real sockets: HTTP (httpx) and WebSocket
(websockets) against the same app ``noisyloop serve`` runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import uvicorn
from noisyloop_client import Client

from app.store.embedded import EmbeddedRedis, free_port
from tests.conftest import served

ADMIN_TOKEN = "client-test-admin-token-0123456789"


async def _trainer(ctx: Any, stop: asyncio.Event) -> None:
    from app.worker_settings import WorkerSettings
    from workers.worker import Worker

    settings = WorkerSettings(roles=("trainer",), worker_id="client-tests", flush_interval=0.01)
    await Worker(ctx.store, settings, metrics=ctx.metrics).run(stop)


@dataclass(frozen=True)
class Service:
    url: str
    admin_token: str


@pytest.fixture(scope="module")
def service(redis_server: EmbeddedRedis) -> Iterator[Service]:
    """The app with its trainer, served by uvicorn on 127.0.0.1:<free port> as ``serve`` runs
    it (one write per response: :mod:`app.server.onewrite`)."""
    from app.main import create_app
    from app.server.options import uvicorn_options
    from app.settings import Settings

    with redis.Redis.from_url(redis_server.url) as r:
        r.flushall()
    settings = Settings(redis_url=redis_server.url, admin_token=ADMIN_TOKEN)
    app = create_app(settings, background=[_trainer])
    port = free_port()
    with served(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                               ws="websockets-sansio", **uvicorn_options(settings))):
        yield Service(f"http://127.0.0.1:{port}", ADMIN_TOKEN)


@pytest.fixture
def admin(service: Service) -> Iterator[Client]:
    with Client(service.url, admin_token=service.admin_token) as c:
        yield c


@pytest.fixture
def api_key(admin: Client) -> str:
    """The key of a new tenant (unique per test)."""
    return admin.create_tenant(f"t-{uuid.uuid4().hex[:12]}")["api_key"]


@pytest.fixture
def client(service: Service, api_key: str) -> Iterator[Client]:
    with Client(service.url, api_key) as c:
        yield c
