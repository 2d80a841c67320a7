"""``GET /v1/models/{model_id}/stream``: predict and feedback over one WebSocket.

Authenticate with the ``Authorization`` header or a first message
``{"op": "auth", "api_key": "..."}``; a failed authentication closes the
socket with code 4401.  Then each message ``{"op": "predict"|"rank"|"feedback",
"id": <any>, ...same body as the POST route}`` gets ``{"id", "result"}`` or
``{"id", "error"}`` (the HTTP route's error object with its ``status``), in
order; an error never closes the socket.  The key and the model are
re-checked on every message, so a revoked key stops working at once: a
predict in the one round trip that logs it
(:func:`~app.api.deciding.predict_cached`) when the caches allow, any other
message in one round trip before it is handled.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import orjson
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import TypeAdapter, ValidationError

from app.api import deciding, decisions
from app.api.context import ApiContext
from app.api.decisionrequest import predict_request, rank_request
from app.api.deps import authorize_model, bearer_token
from app.api.errors import ApiError, internal_error, store_unavailable, validation_error
from app.api.limits import check_json_depth
from app.api.schemas.feedback import FeedbackRequest
from app.api.schemas.predict import PredictRequest
from app.api.schemas.rank import RankBody
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)
router = APIRouter(tags=["stream"])

AUTH_FAILED = 4401
UNKNOWN_MODEL = 4404
AUTH_TIMEOUT_SECONDS = 10.0
#: Messages of one socket handled at once (the reader waits when this many are open).
MAX_IN_FLIGHT = 64
#: Messages being handled (a reference each, so none is collected before it ends).
_HANDLING: set[asyncio.Task[str]] = set()
_FEEDBACK: TypeAdapter[Any] = TypeAdapter(FeedbackRequest)  # type: ignore[arg-type]
_RANK: TypeAdapter[Any] = TypeAdapter(RankBody)  # type: ignore[arg-type]


async def _receive_json(websocket: WebSocket, max_bytes: int, max_depth: int) -> Any:
    """Next message as JSON; raises ApiError for an oversized, too deep or malformed one."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    raw = message.get("text")
    data = raw.encode() if raw is not None else message.get("bytes") or b""
    if len(data) > max_bytes:
        raise ApiError(413, "payload_too_large", f"message exceeds {max_bytes} bytes")
    check_json_depth(data, max_depth)
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(422, "invalid_json", f"message is not valid JSON: {exc}") from None
    if isinstance(message, dict) and _lossy_id(message.get("id")):
        # orjson reads integers beyond 64 bits as floats; the reply must echo the same id
        message = json.loads(data)
    return message


def _lossy_id(value: Any) -> bool:
    """Whether ``value`` holds a float that orjson may have made of an integer beyond 64 bits."""
    if isinstance(value, float):
        return value.is_integer() and abs(value) >= 2.0**63
    if isinstance(value, list):
        return any(_lossy_id(v) for v in value)
    if isinstance(value, dict):
        return any(_lossy_id(v) for v in value.values())
    return False


def _encode_reply(reply: dict[str, Any]) -> str:
    """The reply as JSON text (stdlib json for an id orjson cannot write: integers beyond
    64 bits)."""
    try:
        return orjson.dumps(reply, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    except TypeError:
        rest = {k: v for k, v in reply.items() if k != "id"}
        plain = orjson.loads(orjson.dumps(rest, option=orjson.OPT_SERIALIZE_NUMPY))
        return json.dumps({"id": reply["id"], **plain})


async def _authenticate(websocket: WebSocket, ctx: ApiContext, model_id: str) -> str | None:
    header = websocket.headers.get("authorization")
    try:
        if header:
            token = bearer_token(header)
        else:
            first = await asyncio.wait_for(
                _receive_json(websocket, ctx.settings.max_body_bytes,
                              ctx.settings.max_json_depth), AUTH_TIMEOUT_SECONDS)
            if not (isinstance(first, dict) and first.get("op") == "auth"
                    and isinstance(first.get("api_key"), str)):
                raise ApiError(401, "unauthenticated", "first message must be "
                               '{"op": "auth", "api_key": "..."}')
            token = first["api_key"]
        await authorize_model(ctx, token, model_id)
    except ApiError as exc:
        if exc.code == "unknown_model":
            reply = {"id": None, "error": _error(exc)}
            await websocket.send_text(orjson.dumps(reply).decode())
            await websocket.close(UNKNOWN_MODEL)
            return None
        await websocket.close(AUTH_FAILED, exc.code)
        return None
    except (TimeoutError, *STORE_ERRORS):  # type: ignore[misc]
        await websocket.close(AUTH_FAILED, "authentication failed")
        return None
    return token


async def _handle(ctx: ApiContext, token: str, model_id: str, message: Any) -> Any:
    if not isinstance(message, dict):
        raise ApiError(422, "invalid_request", "a message must be a JSON object")
    op = message.get("op")
    body = {k: v for k, v in message.items() if k not in ("op", "id")}
    if op == "auth":
        return {"authenticated": True}
    request = _predict_request(body) if op == "predict" else None
    if request is not None:
        return await deciding.predict_for_key(ctx, token, model_id, predict_request(request))
    view = await authorize_model(ctx, token, model_id)
    try:
        if op == "predict":  # an invalid body: its 422 comes after the key's check
            return await deciding.predict(
                ctx, view, predict_request(PredictRequest.model_validate(body)))
        if op == "feedback":
            _, doc = await decisions.feedback(ctx, view, _FEEDBACK.validate_python(body))
            return doc
        if op == "rank":
            return await deciding.rank(ctx, view, rank_request(_RANK.validate_python(body)))
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    raise ApiError(422, "unknown_op", "op must be 'predict', 'rank', 'feedback' or 'auth'",
                   "op")


def _predict_request(body: dict[str, Any]) -> PredictRequest | None:
    """The validated predict body, or None (validated again after authentication then, so
    that an invalid key is reported before an invalid body)."""
    try:
        return PredictRequest.model_validate(body)
    except ValidationError:
        return None


async def _reply(ctx: ApiContext, token: str, model_id: str, message: Any,
                 after: list[asyncio.Task[str]]) -> str:
    """The reply text to ``message``, handled once every task in ``after`` is done."""
    for earlier in after:
        await earlier
    msg_id = message.get("id") if isinstance(message, dict) else None
    try:
        reply = {"id": msg_id, "result": await _handle(ctx, token, model_id, message)}
    except ApiError as exc:
        reply = {"id": msg_id, "error": _error(exc)}
    except STORE_ERRORS:
        reply = {"id": msg_id, "error": _error(store_unavailable(
            ctx.settings.retry_after_seconds))}
    except Exception:  # never close the socket for one bad message
        logger.exception("websocket message failed")
        reply = {"id": msg_id, "error": _error(internal_error())}
    return _encode_reply(reply)


def _error(exc: ApiError) -> dict[str, Any]:
    """A reply's ``error``: the HTTP route's error object and its HTTP ``status``."""
    return {**exc.body()["error"], "status": exc.status}


async def _error_reply(exc: ApiError) -> str:
    return _encode_reply({"id": None, "error": _error(exc)})


async def _send_in_order(websocket: WebSocket, replies: asyncio.Queue[asyncio.Task[str] | None]
                         ) -> None:
    """Send each reply when it is ready, in message order, until ``None``.

    Once a send fails (the client is gone) it keeps taking replies without
    sending them, so the reader never waits on a full queue; the reader
    learns of the disconnect from its next receive.
    """
    connected = True
    while (task := await replies.get()) is not None:
        text = await asyncio.shield(task)  # cancelling the sender must not cut a message
        if connected:
            try:
                await websocket.send_text(text)
            except (WebSocketDisconnect, RuntimeError, OSError):
                connected = False


@router.websocket("/v1/models/{model_id}/stream")
async def stream_model(websocket: WebSocket, model_id: str) -> None:
    """Predict and feedback messages, replied in order.

    Up to :data:`MAX_IN_FLIGHT` messages of a socket are handled at once:
    consecutive predicts overlap their Redis round trips (about 2x the
    messages per second of one at a time); any other message waits for every
    message before it and holds back every message after it, so feedback
    (exactly-once joins, duplicates decided by arrival) keeps the order in
    which it was sent.  Replies always go out in message order.
    """
    ctx: ApiContext = websocket.app.state.ctx
    await websocket.accept()
    token = await _authenticate(websocket, ctx, model_id)
    if token is None:
        return
    replies: asyncio.Queue[asyncio.Task[str] | None] = asyncio.Queue(MAX_IN_FLIGHT)
    sender = asyncio.create_task(_send_in_order(websocket, replies))
    barrier: list[asyncio.Task[str]] = []  # the last non-predict message (at most one)
    since_barrier: list[asyncio.Task[str]] = []  # predicts after it
    try:
        while True:
            try:
                message = await _receive_json(websocket, ctx.settings.max_body_bytes,
                                              ctx.settings.max_json_depth)
            except ApiError as exc:
                task = asyncio.create_task(_error_reply(exc))
            else:
                if isinstance(message, dict) and message.get("op") == "predict":
                    task = asyncio.create_task(_reply(ctx, token, model_id, message, barrier))
                    since_barrier.append(task)
                else:
                    task = asyncio.create_task(
                        _reply(ctx, token, model_id, message, barrier + since_barrier))
                    barrier, since_barrier = [task], []
            _HANDLING.add(task)
            task.add_done_callback(_HANDLING.discard)
            await replies.put(task)
    except (WebSocketDisconnect, RuntimeError):
        return
    finally:
        # messages being handled finish (a join is not cut half-way); only sending stops
        sender.cancel()


@router.get("/v1/models/{model_id}/stream", status_code=426,
            responses={426: {"description": "send a WebSocket upgrade request"}})
async def describe_stream(model_id: str) -> None:
    """WebSocket endpoint (documented here; a plain GET gets 426).

    Messages: ``{"op": "auth", "api_key"}`` (first, unless the Authorization
    header is set), ``{"op": "predict", "id", ...PredictRequest}``,
    ``{"op": "rank", "id", ...RankRequest or RankBatchRequest}``,
    ``{"op": "feedback", "id", ...FeedbackRequest}``; replies ``{"id",
    "result"}`` or ``{"id", "error"}`` in order; close code 4401 on failed
    authentication.
    """
    raise ApiError(426, "upgrade_required", "this endpoint is a WebSocket",
                   headers={"Upgrade": "websocket"})
