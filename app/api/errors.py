"""The one JSON error shape and the exception handlers that produce it.

Every error is ``{"error": {"code", "message", "field"}}``: route errors
raise :class:`~app.errors.ApiError` (answered by :func:`error_response`); request
validation, unknown routes, invalid learner parameters, an unreachable store (503
``store_unavailable`` with ``Retry-After``) and unexpected failures are mapped here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.api.responses import OrjsonResponse
from app.errors import ApiError, model_of, validation_error
from app.learners.base import ParamError
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)

_STATUS_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden",
                 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
                 415: "unsupported_media_type", 429: "rate_limited"}

#: FastAPI's detail of a body it cannot decode (raised before validation).
_FASTAPI_BODY_ERROR = "There was an error parsing the body"


def error_response(exc: ApiError) -> OrjsonResponse:
    """The response of an error: its ``{"error": ...}`` document with its status and
    headers."""
    return OrjsonResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def unknown_model(model_id: str) -> ApiError:
    return ApiError(404, "unknown_model", f"no model {model_id!r}")


def from_param_error(exc: ParamError, prefix: str = "") -> ApiError:
    """A learner's :class:`ParamError` as a 422 naming the field."""
    return ApiError(422, "invalid_param", exc.message, f"{prefix}{exc.field}")


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
    return error_response(store_unavailable(retry_after))


def install_error_handlers(app: FastAPI, retry_after: int,
                           authenticate: Callable[[Request], Awaitable[None]] | None = None
                           ) -> None:
    """Map every exception to the one error shape.

    ``authenticate`` (raising :class:`ApiError`) runs before a validation
    error is reported, so that unauthenticated requests get 401, not 422.
    """

    async def on_api_error(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def denied(request: Request) -> OrjsonResponse | None:
        if authenticate is None:
            return None
        try:
            await authenticate(request)
        except ApiError as exc:
            return error_response(exc)
        except STORE_ERRORS:
            return error_response(store_unavailable(retry_after))
        return None

    async def on_validation(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, RequestValidationError)
        content_type = request.headers.get("content-type")
        if not is_json_media_type(content_type) and any(
                tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors()):
            # the body was not read as JSON at all: say what to send, not what it is not
            assert content_type is not None
            return await denied(request) or error_response(
                unsupported_media_type(content_type))
        route = request.scope.get("route")
        body = getattr(getattr(route, "body_field", None), "field_info", None)
        return await denied(request) or error_response(validation_error(
            exc.errors(), model=model_of(getattr(body, "annotation", None))))

    async def on_http(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:
            # a body that is not UTF-8 (FastAPI raises before validating): same as bad JSON
            return await denied(request) or error_response(ApiError(
                422, "invalid_json", "body is not valid UTF-8 JSON"))
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        routes = getattr(request.app.state, "api_routes", None)
        if exc.status_code == 405 and routes:
            headers = {**(headers or {}), "Allow": allowed_methods(routes, request.scope)}
        return error_response(ApiError(exc.status_code, code, str(exc.detail),
                                       headers=headers))

    async def on_param(request: Request, exc: Exception) -> OrjsonResponse:
        assert isinstance(exc, ParamError)
        return error_response(from_param_error(exc))

    async def on_store(request: Request, exc: Exception) -> OrjsonResponse:
        return store_error_response(exc, retry_after)

    async def on_recursion(request: Request, exc: Exception) -> OrjsonResponse:
        return error_response(ApiError(422, "invalid_json", "JSON nested too deeply"))

    async def on_unexpected(request: Request, exc: Exception) -> OrjsonResponse:
        # Starlette's server-error layer logs the traceback and re-raises after this answer
        return error_response(internal_error())

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(ParamError, on_param)
    app.add_exception_handler(RecursionError, on_recursion)
    app.add_exception_handler(Exception, on_unexpected)
    for exc_type in STORE_ERRORS:
        app.add_exception_handler(exc_type, on_store)
