"""ASGI fast path of the hottest request: one dense ``POST /v1/models/{id}/predict``.

FastAPI's routing, dependency solving and pydantic validation cost more CPU
than the rest of a single predict (``docs/benchmarks/service.md``).  This
middleware sits inside the body-limit and observability middleware (so a
fast request is limited, logged and counted like any other) and answers a
single predict itself when, and only when, the request is unambiguous:

* ``POST``, a path ``/v1/models/<id>/predict`` whose id matches the
  contract's pattern, ``Content-Type: application/json``, a bearer token;
* a body that is exactly ``{"features": [numbers...]}`` with an optional
  boolean ``"explore"`` (numbers as pydantic's strict ``FiniteFloat`` takes
  them: JSON integers and floats, not booleans; no integer literal long
  enough for orjson and ``json`` to disagree, see :mod:`app.api.routing`);
* and :func:`~app.api.decisions.predict_cached` can answer it in one round
  trip (cached key record and learner, unchanged in Redis).

Anything else, every error included, goes on to the FastAPI app with the
body replayed, so the fast path changes no response, only the CPU spent.
The one error it answers itself is an unreachable Redis (503
``store_unavailable``, as the app's handler answers it): going on would
wait for a second connect timeout before the same answer.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import decisions
from app.api.errors import store_error_response
from app.api.responses import OrjsonResponse
from app.api.routing import may_hold_big_int
from app.api.schemas.common import MODEL_ID_PATTERN
from app.api.schemas.predict import PredictRequest
from app.store import STORE_ERRORS

_PATH = re.compile(r"/v1/models/([^/]+)/predict")
_MODEL_ID = re.compile(MODEL_ID_PATTERN)
_NUMBER_TYPES = frozenset((int, float))


def single_predict_body(body: bytes) -> PredictRequest | None:
    """The request of a body that is exactly ``{"features": [numbers], "explore"?: bool}``.

    None for any other body (the regular route then parses, validates and
    answers it, errors included).

    >>> single_predict_body(b'{"features": [1, 2.5], "explore": false}').features
    [1, 2.5]
    >>> [single_predict_body(b) for b in (b'{"features": [true]}', b'{"features": [1], "x": 1}',
    ...                                   b'{"instances": [[1]]}', b'[1]', b'{"features": [1')]
    [None, None, None, None, None]
    """
    if may_hold_big_int(body):
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(doc) is not dict:
        return None
    features = doc.get("features")
    explore = doc.get("explore", True)
    if (type(features) is not list or type(explore) is not bool
            or len(doc) != 1 + ("explore" in doc)
            or not _NUMBER_TYPES.issuperset(map(type, features))):
        return None
    return PredictRequest.model_construct(features=features, explore=explore)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


class SinglePredictFastPath:
    """Answer unambiguous single predicts in one Redis round trip, without FastAPI.

    ``route`` is the predict route (its ``path`` template is what the
    observability middleware labels the request with).
    """

    def __init__(self, app: ASGIApp, route: Any) -> None:
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        match = _PATH.fullmatch(scope["path"])
        if match is None:
            await self.app(scope, receive, send)
            return
        message = await receive()
        doc = None
        if not message.get("more_body", False):  # the body-limit middleware sends it whole
            try:
                doc = await self._answer(scope, match.group(1), message.get("body", b""))
            except STORE_ERRORS as exc:
                scope["route"] = self.route
                ctx = scope["app"].state.ctx
                await store_error_response(exc, ctx.settings.retry_after_seconds)(
                    scope, receive, send)
                return
        if doc is None:
            await self.app(scope, _replay(message, receive), send)
            return
        scope["route"] = self.route
        await OrjsonResponse(doc)(scope, receive, send)

    async def _answer(self, scope: Scope, model_id: str, body: bytes) -> dict[str, Any] | None:
        """The response document, or None when the regular route must answer."""
        content_type = _header(scope, b"content-type")
        authorization = _header(scope, b"authorization")
        if (content_type is None
                or content_type.partition(b";")[0].strip().lower() != b"application/json"
                or authorization is None or len(model_id) > 128
                or not _MODEL_ID.fullmatch(model_id)):
            return None
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        token = token.strip()
        request = single_predict_body(body)
        if request is None or scheme.lower() != "bearer" or not token:
            return None
        return await decisions.predict_cached(scope["app"].state.ctx, token, model_id, request)


def _replay(message: Message, receive: Receive) -> Receive:
    """A ``receive`` that hands out ``message`` once more, then reads on."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return message
        return await receive()

    return replay
