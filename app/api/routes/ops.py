"""Operations: liveness, readiness (no authentication), Prometheus metrics (a Bearer token)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from pydantic import BaseModel

from app.api.deps import AuthHeader, Context
from app.api.errors import ApiError
from app.api.responses import OrjsonResponse
from app.api.schemas.common import ErrorResponse
from app.metrics import CONTENT_TYPE, authorized
from app.store import STORE_ERRORS

router = APIRouter(tags=["ops"])


class StatusResponse(BaseModel):
    status: str


@router.get("/healthz", response_model=StatusResponse,
            responses={503: {"model": ErrorResponse}})
async def get_health(ctx: Context) -> OrjsonResponse:
    """200 while the process runs; 503 ``store_down`` while the store it runs itself (the
    embedded redis-server of ``noisyloop serve``) is down and being restarted.  An external
    Redis does not count here (see ``/readyz``)."""
    problem = ctx.health()
    if problem is not None:
        return OrjsonResponse(
            {"error": {"code": "store_down", "message": problem, "field": None}},
            status_code=503, headers={"Retry-After": str(ctx.settings.retry_after_seconds)})
    return OrjsonResponse({"status": "ok"})


@router.get("/readyz", response_model=StatusResponse,
            responses={503: {"model": ErrorResponse}})
async def get_readiness(ctx: Context) -> OrjsonResponse:
    """200 when Redis answers, else 503."""
    try:
        await asyncio.wait_for(ctx.store.ping(), ctx.settings.redis_socket_timeout)
    except (*STORE_ERRORS, TimeoutError):  # type: ignore[misc]
        return OrjsonResponse(
            {"error": {"code": "store_unavailable", "message": "Redis does not answer",
                       "field": None}},
            status_code=503, headers={"Retry-After": str(ctx.settings.retry_after_seconds)})
    return OrjsonResponse({"status": "ok"})


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE: {}},
                             "description": "Prometheus text format"},
                       401: {"model": ErrorResponse}})
async def get_metrics(ctx: Context, authorization: AuthHeader = None) -> Response:
    """Every series of :class:`app.metrics.Metrics`, to a caller with the metrics token or
    the admin token (``Authorization: Bearer``): the series name tenants, models and
    challengers."""
    if not authorized(authorization, ctx.settings.metrics_tokens()):
        raise ApiError(401, "invalid_metrics_token",
                       "the metrics need Authorization: Bearer <metrics token> "
                       "(NOISYLOOP_METRICS_TOKEN) or the admin token",
                       headers={"WWW-Authenticate": "Bearer"})
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE)
