"""The one JSON error shape and the exception handlers that produce it.

Every error is ``{"error": {"code", "message", "field"}}``: route errors
raise :class:`ApiError`; request validation, unknown routes, invalid learner
parameters, an unreachable store (503 ``store_unavailable`` with
``Retry-After``) and unexpected failures are mapped here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.api.responses import OrjsonResponse
from app.learners.base import ParamError
from app.learners.registry import did_you_mean
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)

_STATUS_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden",
                 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
                 415: "unsupported_media_type", 429: "rate_limited"}

#: FastAPI's detail of a body it cannot decode (raised before validation).
_FASTAPI_BODY_ERROR = "There was an error parsing the body"


class ApiError(Exception):
    """An error response: HTTP status, snake_case code, message, JSON path of the field."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """The ``{"error": ...}`` document."""
        return error_body(self.code, self.message, self.field)

    def response(self) -> OrjsonResponse:
        return OrjsonResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def unknown_model(model_id: str) -> ApiError:
    return ApiError(404, "unknown_model", f"no model {model_id!r}")


def from_param_error(exc: ParamError, prefix: str = "") -> ApiError:
    """A learner's :class:`ParamError` as a 422 naming the field."""
    return ApiError(422, "invalid_param", exc.message, f"{prefix}{exc.field}")


def field_path(loc: Sequence[int | str], skip_root: bool = True) -> str | None:
    """``("body", "instances", 3, "<dense>", 7)`` -> ``"instances[3][7]"``.

    Union tags (``"<...>"``) and pydantic's type markers (``"list[...]"``,
    ``"function-after[...]"``) are dropped.
    """
    parts: list[str] = []
    items = list(loc)
    if skip_root and items and items[0] in ("body", "query", "path", "header"):
        items = items[1:]
    for item in items:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item.startswith("<") or "[" in item:
            continue
        else:
            parts.append(f".{item}" if parts else item)
    return "".join(parts) or None


#: What pydantic puts before the message of a ``ValueError`` raised in a validator.
_VALUE_ERROR_PREFIX = "Value error, "


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``X``, ``X | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [m for m in map(_model_of, get_args(annotation)) if m is not None]
    return models[0] if len(models) == 1 else None


def _taken_fields(model: type[BaseModel] | None, loc: Sequence[int | str]
                  ) -> tuple[str, list[str]]:
    """Which object of a body of ``model`` holds the field at ``loc`` (``"the body"`` or its
    path) and the fields that object takes (none when not known: a union, a list)."""
    items = list(loc[1:] if loc and loc[0] == "body" else loc)[:-1]
    for name in items:
        field = model.model_fields.get(name) if isinstance(name, str) and model else None
        model = _model_of(field.annotation) if field is not None else None
    taken = list(model.model_fields) if model is not None else []
    return field_path(items, skip_root=False) or "the body", taken


def validation_error(errors: Sequence[Any], prefix: str = "",
                     fields: Sequence[str] = (), what: str = "the body",
                     model: type[BaseModel] | None = None) -> ApiError:
    """The first pydantic error as a 422 ``invalid_request`` naming its field; a field the
    body does not take comes first (a misspelt name also leaves the field it misspells
    missing).

    ``fields`` are the fields ``what`` takes: a field it does not take is
    answered with them (and the closest one, if it looks misspelt); with the body's
    ``model`` instead, those of the object holding it.
    """
    unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
    first = (unknown or list(errors) or [{"loc": (), "msg": "invalid request"}])[0]
    loc = tuple(first.get("loc", ()))
    path = field_path(loc)
    if prefix:
        path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path or ''}"
    message = str(first.get("msg", "invalid value")).removeprefix(_VALUE_ERROR_PREFIX)
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx")
        reason = (ctx.get("error") if isinstance(ctx, dict) else None) or message
        where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return ApiError(422, "invalid_json", f"body is not valid JSON: {reason}{where}")
    if first.get("type") == "missing" and path is None:
        return ApiError(422, "invalid_request", "a JSON body is required")
    if first.get("type") == "extra_forbidden":
        if model is not None:
            what, fields = _taken_fields(model, loc)
        elif len(loc) != 1:
            fields = ()
        if fields:
            name = str(loc[-1])
            message = (f"{what} takes no {name!r}{did_you_mean(name, list(fields))}; it takes "
                       + ", ".join(fields))
    return ApiError(422, "invalid_request", message, path)


def internal_error() -> ApiError:
    """The 500 of an unexpected failure (its details go to the log, never to the client)."""
    return ApiError(500, "internal_error", "internal error")


def unsupported_media_type(content_type: str) -> ApiError:
    """The 415 of a body sent as something other than JSON."""
    return ApiError(415, "unsupported_media_type", f"the body is read as JSON: send it with "
                    f"'Content-Type: application/json' (or no Content-Type), not "
                    f"{content_type[:100]!r}", "Content-Type")


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a request's ``Content-Type`` lets its body be read as JSON (absent,
    ``application/json`` or ``application/*+json``, any parameters)."""
    if not content_type:
        return True
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


def allowed_methods(routes: Sequence[Any], scope: Any) -> str:
    """The ``Allow`` header of a path: the methods of every route in ``routes`` matching it
    (FastAPI adds one route per method, and Starlette's 405 names the first one's alone)."""
    methods: set[str] = set()
    for route in routes:
        if getattr(route, "methods", None) and route.matches(scope)[0] != Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))


def store_unavailable(retry_after: int) -> ApiError:
    return ApiError(503, "store_unavailable", "the store (Redis) is unreachable; retry later",
                    headers={"Retry-After": str(retry_after)})


def store_error_response(exc: Exception, retry_after: int) -> OrjsonResponse:
    """The 503 of an unreachable store (logged once per request)."""
    logger.warning("store unavailable: %s", exc)
    return store_unavailable(retry_after).response()


def install_error_handlers(app: FastAPI, retry_after: int,
                           authenticate: Callable[[Request], Awaitable[None]] | None = None
                           ) -> None:
    """Map every exception to the one error shape.

    ``authenticate`` (raising :class:`ApiError`) runs before a validation
    error is reported, so that unauthenticated requests get 401, not 422.
    """

    async def on_api_error(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def denied(request: Request) -> OrjsonResponse | None:
        if authenticate is None:
            return None
        try:
            await authenticate(request)
        except ApiError as exc:
            return exc.response()
        except STORE_ERRORS:
            return store_unavailable(retry_after).response()
        return None

    async def on_validation(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, RequestValidationError)
        content_type = request.headers.get("content-type")
        if not is_json_media_type(content_type) and any(
                tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors()):
            # the body was not read as JSON at all: say what to send, not what it is not
            assert content_type is not None
            return await denied(request) or unsupported_media_type(content_type).response()
        route = request.scope.get("route")
        body = getattr(getattr(route, "body_field", None), "field_info", None)
        return await denied(request) or validation_error(
            exc.errors(), model=_model_of(getattr(body, "annotation", None))).response()

    async def on_http(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:
            # a body that is not UTF-8 (FastAPI raises before validating): same as bad JSON
            return await denied(request) or ApiError(
                422, "invalid_json", "body is not valid UTF-8 JSON").response()
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        routes = getattr(request.app.state, "api_routes", None)
        if exc.status_code == 405 and routes:
            headers = {**(headers or {}), "Allow": allowed_methods(routes, request.scope)}
        return ApiError(exc.status_code, code, str(exc.detail), headers=headers).response()

    async def on_param(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, ParamError)
        return from_param_error(exc).response()

    async def on_store(request: Request, exc: Exception) -> OrjsonResponse:
        return store_error_response(exc, retry_after)

    async def on_recursion(request: Request, exc: Exception) -> OrjsonResponse:
        return ApiError(422, "invalid_json", "JSON nested too deeply").response()

    async def on_unexpected(request: Request, exc: Exception) -> OrjsonResponse:
        # Starlette's server-error layer logs the traceback and re-raises after this answer
        return internal_error().response()

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(ParamError, on_param)
    app.add_exception_handler(RecursionError, on_recursion)
    app.add_exception_handler(Exception, on_unexpected)
    for exc_type in STORE_ERRORS:
        app.add_exception_handler(exc_type, on_store)
