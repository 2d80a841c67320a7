"""A real noisyloop service on a free port (uvicorn in a thread, real Redis, in-process trainer).

The client is tested over real sockets: HTTP (httpx) and WebSocket
(websockets) against the same app ``noisyloop serve`` runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from noisyloop_client import Client

from app.store.embedded import EmbeddedRedis
from tests.conftest import served_service

ADMIN_TOKEN = "client-test-admin-token-0123456789"


@dataclass(frozen=True)
class Service:
    url: str
    admin_token: str


@pytest.fixture(scope="module")
def service(redis_server: EmbeddedRedis) -> Iterator[Service]:
    """The app with its trainer, served by uvicorn on 127.0.0.1:<free port> as ``serve`` runs
    it (one write per response: :mod:`app.server.onewrite`)."""
    with served_service(redis_server.url, ADMIN_TOKEN, "client-tests",
                        ws="websockets-sansio") as url:
        yield Service(url, ADMIN_TOKEN)


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
