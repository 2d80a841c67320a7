"""ASGI fast path of the hottest requests: one dense ``POST /v1/models/{id}/predict``,
and dense ``POST /v1/models/{id}/rank`` (one request or a batch).

Starlette's and FastAPI's layers (error middleware, telemetry, body limit,
exception middleware, routing, dependency solving, pydantic validation)
cost more CPU than the rest of a single predict
(``docs/benchmarks/service.md``), and validating the 80,000 numbers of a
batch rank one by one costs more than ranking them.  This layer wraps the
whole app (see :class:`app.main.NoisyloopApp`) and answers such a request
itself when, and only when, it is unambiguous:

* ``POST``, a path ``/v1/models/<id>/predict`` or ``.../rank`` whose id
  matches the contract's pattern, ``Content-Type: application/json`` (or
  none), a bearer token, a ``Content-Length`` within the body limit, no
  ``Origin`` (CORS is the app's business);
* a simple single predict body or a plain dense rank body, as the hand
  parsers beside the API's schemas take them (:mod:`app.api.fastbody`);
* and :func:`~app.api.deciding.predict_cached` or
  :func:`~app.api.deciding.rank_cached` can answer it in one round trip
  (cached key record and learner, unchanged in Redis).

Such a request is observed as every other (request id header, metrics under
the route template, one access-log line: :class:`ObservedRequest`).
Anything else, every error included, goes on to the app with the body
replayed, so the fast path changes no response, only the CPU spent.  The
errors it answers itself (observed likewise) are an unreachable Redis (503
``store_unavailable``, as the app's handler answers it): going on would wait
for a second connect timeout before the same answer; and an unexpected
failure (500 ``internal_error``, as the app answers it): going on could log
the decision twice.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import deciding
from app.api.deps import bearer_token
from app.api.errors import ApiError, error_response, internal_error, store_error_response
from app.api.fastbody import plain_rank_body, single_predict_body
from app.api.middleware import ObservedRequest
from app.api.responses import dumps
from app.api.schemas.common import MODEL_ID_PATTERN
from app.metrics import Metrics
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)
_PATH = re.compile(r"/v1/models/([^/]+)/(predict|rank)")
_MODEL_ID = re.compile(MODEL_ID_PATTERN)
_JSON = b"application/json"
_WANTED = frozenset((b"content-type", b"content-length", b"authorization", b"origin"))


class DecisionFastPath:
    """Answer unambiguous single predicts and dense ranks in one Redis round trip, before
    the app's layers.

    ``templates`` are the routes' path templates by the path's last part
    (the metrics label); ``max_body_bytes`` and ``max_json_depth`` the app's
    body limits (a larger or deeper body goes on to the app, which refuses it).
    """

    def __init__(self, app: ASGIApp, *, templates: dict[str, str], metrics: Metrics,
                 max_body_bytes: int, max_json_depth: int, retry_after_seconds: int) -> None:
        self.app = app
        self.templates = templates
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.retry_after_seconds = retry_after_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (_PATH.fullmatch(scope["path"])
                 if scope["type"] == "http" and scope["method"] == "POST" else None)
        token = self._token(scope) if match is not None else None
        if match is None or token is None:
            await self.app(scope, receive, send)
            return
        messages = await self._read(receive)
        if messages[-1]["type"] != "http.request" or messages[-1].get("more_body", False):
            await self.app(scope, _replay(messages, receive), send)
            return
        body = messages[0].get("body", b"") if len(messages) == 1 else b"".join(
            m.get("body", b"") for m in messages)
        kind = match.group(2)
        observed = ObservedRequest(self.metrics)
        answer: bytes | Response | None
        try:
            answer = await self._answer(token, match.group(1), kind, body, scope)
        except STORE_ERRORS as exc:
            answer = store_error_response(exc, self.retry_after_seconds)
        except Exception:  # a bug: answered, logged and counted as the app's 500s are
            logger.exception("%s failed", kind)
            answer = error_response(internal_error())
        except BaseException:  # cancelled: nothing is answered; the log context is restored
            observed.abandon()
            raise
        if answer is None:
            observed.abandon()
            await self.app(scope, _replay(messages, receive), send)
            return
        status = 200 if isinstance(answer, bytes) else answer.status_code
        try:
            if isinstance(answer, bytes):
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-type", _JSON), (b"content-length", str(len(answer)).encode()),
                    observed.header()]})
                await send({"type": "http.response.body", "body": answer})
            else:
                answer.raw_headers.append(observed.header())
                await answer(scope, receive, send)
        finally:
            observed.finish("POST", self.templates[kind], status)

    async def _read(self, receive: Receive) -> list[Message]:
        """The request's messages up to its last body part (or up to anything else, or
        past the body limit: the app then reads on and answers)."""
        messages = [await receive()]
        size = len(messages[0].get("body", b""))
        while (messages[-1]["type"] == "http.request" and messages[-1].get("more_body", False)
               and size <= self.max_body_bytes):
            messages.append(await receive())
            size += len(messages[-1].get("body", b""))
        return messages

    def _token(self, scope: Scope) -> str | None:
        """The bearer token of a request the fast path may take (headers only), else None."""
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _WANTED:
                found[name] = value
        length = found.get(b"content-length", b"")
        if (b"origin" in found or b"authorization" not in found or not length.isdigit()
                or int(length) > self.max_body_bytes
                or found.get(b"content-type", _JSON).partition(b";")[0].strip().lower() != _JSON):
            return None
        try:
            return bearer_token(found[b"authorization"].decode("latin-1"))
        except ApiError:
            return None

    async def _answer(self, token: str, model_id: str, kind: str, body: bytes, scope: Scope
                      ) -> bytes | None:
        """The response body, or None when the app must answer."""
        if not _MODEL_ID.fullmatch(model_id):  # (the pattern bounds the length too)
            return None
        ctx = scope["app"].state.ctx
        doc: dict[str, Any] | None
        if kind == "rank":
            request = plain_rank_body(body, self.max_json_depth)
            if request is None:
                return None
            doc = await deciding.rank_cached(ctx, token, model_id, request)
        else:
            request = single_predict_body(body)
            if request is None:
                return None
            doc = await deciding.predict_cached(ctx, token, model_id, request)
        return None if doc is None else dumps(doc)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out ``messages`` once more, then reads on."""
    left = list(messages)

    async def replay() -> Message:
        return left.pop(0) if left else await receive()

    return replay
