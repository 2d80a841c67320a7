"""Helpers of the fast-path tests (single predict and dense rank): which path answered a
request, and the fast path run by hand around a recording inner app."""

from __future__ import annotations

import re
from typing import Any

from app.server.fastpath import DecisionFastPath
from tests.api.conftest import ADMIN, TestClient


def paths(client: TestClient, kind: str) -> dict[str, float]:
    """``noisyloop_{kind}_requests_total`` by path (``kind``: predict or rank)."""
    text = client.get("/metrics", headers=ADMIN).text
    return {m[1]: float(m[2]) for m in re.finditer(
        rf'noisyloop_{kind}_requests_total\{{path="(\w+)"\}} (\S+)', text)}


def answered_by(client: TestClient, url: str, kind: str, auth: dict[str, str], body: Any,
                **kwargs: Any) -> tuple[Any, str | None]:
    """POST ``body`` to ``url``; return the response and the path that answered it (None:
    neither), read from the ``kind`` metric."""
    before = paths(client, kind)
    r = client.post(url, json=body, headers=auth, **kwargs)
    after = paths(client, kind)
    grew = [p for p in after if after[p] > before.get(p, 0)]
    assert len(grew) <= 1
    return r, (grew[0] if grew else None)


def revoke_key(client: TestClient, auth: dict[str, str]) -> None:
    """Revoke the API key of ``auth`` (tenant acme) through the admin API."""
    key_id = auth["Authorization"].split(".")[2]
    assert client.delete(f"/v1/admin/tenants/acme/keys/{key_id}",
                         headers=ADMIN).status_code == 204


def call_fast_path(client: TestClient, body: bytes | list[bytes], auth: dict[str, str],
                   path: str) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Run :class:`DecisionFastPath` around a recording inner app, on the app's loop (a list
    of ``body`` parts comes in as many messages).

    Returns the messages sent and the bodies the inner app received.
    """
    inner_bodies: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        parts = [await receive()]
        while parts[-1]["more_body"]:
            parts.append(await receive())
        inner_bodies.append(b"".join(m["body"] for m in parts))
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    parts = [body] if isinstance(body, bytes) else list(body)
    scope = {"type": "http", "method": "POST", "path": path, "app": client.app,
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(sum(map(len, parts))).encode()),
                         (b"authorization", auth["Authorization"].encode())]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        part = parts.pop(0)
        return {"type": "http.request", "body": part, "more_body": bool(parts)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    assert client.portal is not None
    options = client.app.fast_path_options  # type: ignore[attr-defined]
    client.portal.call(DecisionFastPath(inner, **options), scope, receive, send)
    return sent, inner_bodies
