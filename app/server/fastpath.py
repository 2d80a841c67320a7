"""ASGI fast path of the hottest request: one dense ``POST /v1/models/{id}/predict``.

Starlette's and FastAPI's layers (error middleware, telemetry, body limit,
exception middleware, routing, dependency solving, pydantic validation)
cost more CPU than the rest of a single predict
(``docs/benchmarks/service.md``).  This layer wraps the whole app (see
:class:`app.main.NoisyloopApp`) and answers a single predict itself when,
and only when, the request is unambiguous:

* ``POST``, a path ``/v1/models/<id>/predict`` whose id matches the
  contract's pattern, ``Content-Type: application/json`` (or none), a bearer token, a
  ``Content-Length`` within the body limit, no ``Origin`` (CORS is the app's
  business), and the whole body in one message;
* a body that is exactly ``{"features": [numbers...]}`` with an optional
  boolean ``"explore"`` (numbers as pydantic's strict ``FiniteFloat`` takes
  them: JSON integers and floats, not booleans; no integer literal long
  enough for orjson and ``json`` to disagree, see :mod:`app.api.routing`);
* and :func:`~app.api.decisions.predict_cached` can answer it in one round
  trip (cached key record and learner, unchanged in Redis).

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

import orjson
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import decisions
from app.api.deps import bearer_token
from app.api.errors import ApiError, internal_error, store_error_response
from app.api.middleware import ObservedRequest
from app.api.responses import dumps
from app.api.routing import may_hold_big_int
from app.api.schemas.common import MODEL_ID_PATTERN
from app.api.schemas.predict import PredictRequest
from app.metrics import Metrics
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)
_PATH = re.compile(r"/v1/models/([^/]+)/predict")
_MODEL_ID = re.compile(MODEL_ID_PATTERN)
_NUMBER_TYPES = frozenset((int, float))
_JSON = b"application/json"
#: The "features" key of a single predict comes within this many bytes of the body's start
#: (a body with more white space than that before it just takes the regular route).
_FEATURES_WITHIN = 64
_WANTED = frozenset((b"content-type", b"content-length", b"authorization", b"origin"))


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
    if b'"features"' not in body[:_FEATURES_WITHIN] or may_hold_big_int(body):
        return None  # a batch (1 MB of instances) is not parsed here only to be refused
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


class SinglePredictFastPath:
    """Answer unambiguous single predicts in one Redis round trip, before the app's layers.

    ``template`` is the predict route's path template (the metrics label);
    ``max_body_bytes`` the app's body limit (a larger body goes on to the
    app, which refuses it).
    """

    def __init__(self, app: ASGIApp, *, template: str, metrics: Metrics, max_body_bytes: int,
                 retry_after_seconds: int) -> None:
        self.app = app
        self.template = template
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.retry_after_seconds = retry_after_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (_PATH.fullmatch(scope["path"])
                 if scope["type"] == "http" and scope["method"] == "POST" else None)
        token = self._token(scope) if match is not None else None
        if match is None or token is None:
            await self.app(scope, receive, send)
            return
        message = await receive()
        if message["type"] != "http.request" or message.get("more_body", False):
            await self.app(scope, _replay(message, receive), send)
            return
        observed = ObservedRequest(self.metrics)
        answer: bytes | Response | None
        try:
            answer = await self._answer(token, match.group(1), message.get("body", b""), scope)
        except STORE_ERRORS as exc:
            answer = store_error_response(exc, self.retry_after_seconds)
        except Exception:  # a bug: answered, logged and counted as the app's 500s are
            logger.exception("single predict failed")
            answer = internal_error().response()
        except BaseException:  # cancelled: nothing is answered; the log context is restored
            observed.abandon()
            raise
        if answer is None:
            observed.abandon()
            await self.app(scope, _replay(message, receive), send)
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
            observed.finish("POST", self.template, status)

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

    async def _answer(self, token: str, model_id: str, body: bytes, scope: Scope
                      ) -> bytes | None:
        """The response body, or None when the app must answer."""
        if not _MODEL_ID.fullmatch(model_id):  # (the pattern bounds the length too)
            return None
        request = single_predict_body(body)
        if request is None:
            return None
        doc = await decisions.predict_cached(scope["app"].state.ctx, token, model_id, request)
        return None if doc is None else dumps(doc)


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
