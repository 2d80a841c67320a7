"""Request dependencies as ``Annotated`` aliases: context, admin, tenant, model view.

:data:`ModelDep` authenticates the API key *and* reads the model's config,
version and noise rates in one pipelined Redis round trip.  A key of another
tenant gets 404 ``unknown_model``, exactly like a model that does not exist.
"""

from __future__ import annotations

import hmac
import math
from contextvars import ContextVar
from typing import Annotated

from fastapi import Depends, Header, Path, Request

from app.api.cache import CachedModel
from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.api.schemas.common import MODEL_ID_PATTERN
from app.store.models import ModelView
from app.store.tenants import KeyRecord, parse_api_key

#: Tenant and model of the current request (for logs).
request_tenant: ContextVar[str | None] = ContextVar("request_tenant", default=None)
request_model: ContextVar[str | None] = ContextVar("request_model", default=None)

AuthHeader = Annotated[str | None, Header(alias="Authorization", include_in_schema=False)]


async def get_context(request: Request) -> ApiContext:
    """The app's shared context (``async``: FastAPI runs a plain ``def`` dependency in
    a worker thread, which costs more than the whole rest of a small request)."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


Context = Annotated[ApiContext, Depends(get_context)]


def bearer_token(authorization: str | None) -> str:
    """The token of ``Authorization: Bearer <token>``; 401 ``unauthenticated`` otherwise."""
    if not authorization:
        raise ApiError(401, "unauthenticated", "missing Authorization header",
                       headers={"WWW-Authenticate": "Bearer"})
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        raise ApiError(401, "unauthenticated", "Authorization must be 'Bearer <key>'",
                       headers={"WWW-Authenticate": "Bearer"})
    return token


def is_admin_token(ctx: ApiContext, token: str) -> bool:
    """Whether ``token`` is the configured admin token (constant-time compare)."""
    expected = ctx.settings.admin_token
    return expected is not None and hmac.compare_digest(token.encode(),
                                                        expected.get_secret_value().encode())


def invalid_key(ctx: ApiContext, token: str) -> ApiError:
    """The 401 of a token that is no valid API key (the admin token is told what to send)."""
    message = ("this route takes a tenant's API key, not the admin token (POST "
               "/v1/admin/tenants/{tenant_id}/keys creates one)" if is_admin_token(ctx, token)
               else "unknown or revoked API key")
    return ApiError(401, "invalid_api_key", message, headers={"WWW-Authenticate": "Bearer"})


async def require_admin(ctx: Context, authorization: AuthHeader = None) -> None:
    """Admin routes: the configured admin token (constant-time compare)."""
    token = bearer_token(authorization)
    if not is_admin_token(ctx, token):
        message = ("this route takes the admin token, not a tenant's API key"
                   if parse_api_key(token) is not None else "unknown admin token")
        raise ApiError(401, "invalid_admin_token", message,
                       headers={"WWW-Authenticate": "Bearer"})


async def check_credentials(request: Request) -> None:
    """Authenticate a request whose body or parameters failed validation.

    FastAPI validates the body before it runs the dependencies; calling this
    from the validation-error handler keeps 401 ahead of 422, so a caller
    without valid credentials learns nothing about the schema of a route.
    """
    path = request.url.path
    if not path.startswith("/v1/"):
        return
    ctx = await get_context(request)
    authorization = request.headers.get("authorization")
    if path.startswith("/v1/admin/"):
        await require_admin(ctx, authorization)
    else:
        await require_tenant(ctx, authorization)


async def enforce_rate_limit(ctx: ApiContext, tenant: str) -> None:
    """429 ``rate_limited`` with ``Retry-After`` when ``tenant``'s token bucket is empty.

    Off when ``settings.rate_limit_per_second`` is 0; one request costs one
    token (a batch too), every HTTP request and WebSocket message counts.
    """
    rate = ctx.settings.rate_limit_per_second
    if rate <= 0:
        return
    burst = ctx.settings.rate_limit_burst
    wait = await ctx.store.rate.take(tenant, rate, burst)
    if wait > 0:
        raise ApiError(429, "rate_limited", f"more than {rate:g} requests per second "
                       f"(burst {burst}); retry in {wait:.3f} s",
                       headers={"Retry-After": str(max(1, math.ceil(wait)))})


async def require_tenant(ctx: Context, authorization: AuthHeader = None) -> str:
    """The tenant of a valid API key (within its rate limit)."""
    token = bearer_token(authorization)
    tenant = await ctx.store.tenants.authenticate(token)
    if tenant is None:
        raise invalid_key(ctx, token)
    request_tenant.set(tenant)
    await enforce_rate_limit(ctx, tenant)
    return tenant


ModelIdPath = Annotated[str, Path(max_length=128, pattern=MODEL_ID_PATTERN,
                                  description="the model's id")]


async def authorize_model(ctx: ApiContext, token: str, model_id: str) -> ModelView:
    """Authenticate ``token`` and load the model view (one round trip; a second one for the
    rate limit when it is on).  The verified key record is cached for
    :func:`app.api.deciding.predict_cached`."""
    key, view = await ctx.store.models.view_with_key(token, model_id)
    if key is None:
        raise invalid_key(ctx, token)
    ctx.keys.remember(key)
    request_tenant.set(key.tenant)
    request_model.set(model_id)
    await enforce_rate_limit(ctx, key.tenant)
    if view is None:
        raise unknown_model(model_id)
    return view


async def require_model(request: Request, model_id: ModelIdPath,
                        authorization: AuthHeader = None) -> ModelView:
    """The model view of ``model_id`` for the request's API key.

    Takes the request rather than :data:`Context`: each sub-dependency costs
    FastAPI tens of microseconds per request.  The feedback route calls it
    directly with its own parameters, one dependency less on a hot route
    (with the hot routes matched first, this gave 23 % less CPU per single
    predict in process when the predict route still used it;
    ``bench/bench_predict_cpu.py``).
    """
    return await authorize_model(await get_context(request), bearer_token(authorization),
                                 model_id)


Admin = Annotated[None, Depends(require_admin)]
Tenant = Annotated[str, Depends(require_tenant)]
ModelDep = Annotated[ModelView, Depends(require_model)]


def cached_model(ctx: ApiContext, token: str,
                 model_id: str) -> tuple[KeyRecord, CachedModel] | None:
    """The cached key record (its secret verified in-process, a constant-time compare) and
    the cached model of a one-round-trip decision; None when the regular path must answer
    (nothing cached, a secret that does not verify, a Redis Cluster, a rate limit: see
    :func:`predict_cached`)."""
    parsed = parse_api_key(token)
    if parsed is None or not ctx.store.single_redis or ctx.settings.rate_limit_per_second > 0:
        return None
    key = ctx.keys.get(parsed.key_id)
    entry = ctx.cache.peek(parsed.tenant, model_id)
    if key is None or entry is None or not key.verifies(parsed):
        return None
    return key, entry
