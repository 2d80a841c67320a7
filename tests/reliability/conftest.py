"""Shared helpers of the reliability tests: fuzz budget, service set-up over any HTTP session.

``NOISYLOOP_FUZZ_EXAMPLES`` sets the number of generated requests per API
operation (default: a CI-sized run; ``make fuzz-long`` raises it).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from app.learners.registry import algorithms
from app.tasks import get_task

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
#: Generated requests per operation and generation mode in CI; the long run raises it.
FUZZ_EXAMPLES = int(os.environ.get("NOISYLOOP_FUZZ_EXAMPLES", "20"))


class Session(Protocol):
    """What the set-up helpers need of a client (starlette's TestClient, requests, httpx)."""

    def request(self, method: str, url: str, **kwargs: Any) -> Any: ...


def setup_tenant(session: Session, tenant: str = "acme") -> dict[str, str]:
    """Create a tenant; return the Authorization header of its key."""
    r = session.request("POST", "/v1/admin/tenants", json={"tenant_id": tenant}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def setup_model(session: Session, auth: dict[str, str], model_id: str,
                **overrides: Any) -> dict[str, Any]:
    """Create a small model (label task, rcnbf, 4 features, 3 classes unless overridden;
    an override of None drops the field)."""
    body = {"model_id": model_id, "task": "label", "algorithm": "rcnbf", "n_features": 4,
            "n_classes": 3, "seed": 0, **overrides}
    body = {k: v for k, v in body.items() if v is not None}  # n_classes=None: a task without
    r = session.request("POST", "/v1/models", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return dict(r.json())


def task_body(task: str) -> dict[str, Any]:
    """Fields of a small model of ``task`` with its default algorithm."""
    return {"task": task, "algorithm": algorithms(task)[0],
            "n_classes": 3 if get_task(task).needs_classes else None}
