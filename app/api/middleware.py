"""ASGI middleware: body size and nesting limits, request id, access log and HTTP metrics."""

from __future__ import annotations

import logging
import secrets
import time

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.deps import bearer_token, request_model, request_tenant
from app.api.errors import ApiError
from app.api.limits import check_json_depth
from app.logs import request_id
from app.metrics import Metrics
from app.store import STORE_ERRORS

logger = logging.getLogger("app.api.access")


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _count_too_large(scope: Scope) -> None:
    """Count a refused body on ``tenant_limit_reached{tenant, "max_body_bytes"}`` when the
    request carries a valid API key (one Redis read, on a refusal only; no key, an invalid
    one or an unreachable store: not counted, the 413 is answered all the same)."""
    ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
    authorization = dict(scope.get("headers") or []).get(b"authorization")
    if ctx is None or authorization is None:
        return
    try:
        token = bearer_token(authorization.decode("latin-1"))
        tenant = await ctx.store.tenants.authenticate(token)
    except ApiError:  # not a bearer token
        return
    except STORE_ERRORS:
        return
    if tenant is not None:
        ctx.metrics.limit_reached.labels(tenant, "max_body_bytes").inc()


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` (413) or nested deeper than ``max_depth`` (422
    ``json_too_deep``) before any work: the body is read up front, then replayed."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_depth: int = 32) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = b'{"error":{"code":"payload_too_large","message":"request body exceeds ' + \
            str(self.max_bytes).encode() + b' bytes (limit max_body_bytes)","field":null}}'
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _count_too_large(scope)
            await _send_json(send, 413, too_large)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _count_too_large(scope)
                await _send_json(send, 413, too_large)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            check_json_depth(body, self.max_depth)
        except ApiError as exc:
            await _send_json(send, exc.status, orjson.dumps(exc.body()))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class ObservedRequest:
    """What the API records of one HTTP request: its id, metrics and one access-log line.

    Created when the request comes in (a new id, the log context cleared),
    :meth:`finish` ed when it is answered.  Used by
    :class:`ObservabilityMiddleware` and by the single-predict fast path,
    which answers before that middleware (:mod:`app.server.fastpath`).
    """

    __slots__ = ("_token", "metrics", "rid", "started")

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.rid = secrets.token_hex(8)
        self._token = request_id.set(self.rid)
        request_tenant.set(None)
        request_model.set(None)
        self.started = time.perf_counter()

    def header(self) -> tuple[bytes, bytes]:
        """The ``X-Request-ID`` response header."""
        return b"x-request-id", self.rid.encode()

    def finish(self, method: str, template: str, status: int) -> None:
        """Count and log the answered request; restore the log context."""
        elapsed = time.perf_counter() - self.started
        self.metrics.observe_request(method, template, status, elapsed)
        logger.info("%s %s %d", method, template, status, extra={
            "method": method, "path": template, "status": status,
            "duration_ms": round(elapsed * 1000, 2), "tenant": request_tenant.get(),
            "model": request_model.get()})
        self.abandon()

    def abandon(self) -> None:
        """Restore the log context without recording (another layer answers)."""
        request_id.reset(self._token)


class ObservabilityMiddleware:
    """Request id (``X-Request-ID``), one access-log line, HTTP request metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        observed = ObservedRequest(self.metrics)
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], observed.header()]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            observed.finish(scope.get("method", ""),
                            getattr(route, "path", None) or "unmatched", status)
