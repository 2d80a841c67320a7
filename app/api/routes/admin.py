"""Admin routes: tenants and their API keys (admin token required)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from app.api import modelops
from app.api.deps import Admin, Context
from app.api.errors import ApiError
from app.api.schemas.admin import (
    KeyCreatedResponse,
    TenantCreatedResponse,
    TenantCreateRequest,
    TenantListResponse,
    TenantSummary,
)
from app.api.schemas.common import TENANT_ID_PATTERN, ErrorResponse
from app.api.schemas.models import ModelListResponse
from app.store.tenants import KEY_ID_RE

TenantIdPath = Annotated[str, Path(pattern=TENANT_ID_PATTERN, description="the tenant's id")]
KeyIdPath = Annotated[str, Path(pattern=KEY_ID_RE.pattern, description="the key's id")]

router = APIRouter(prefix="/v1/admin", tags=["admin"],
                   responses={401: {"model": ErrorResponse}})


def unknown_tenant(tenant_id: str) -> ApiError:
    return ApiError(404, "unknown_tenant", f"no tenant {tenant_id!r}")


@router.post("/tenants", status_code=201, response_model=TenantCreatedResponse,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def create_tenant(body: TenantCreateRequest, ctx: Context,
                        _: Admin) -> TenantCreatedResponse:
    """Create a tenant and its first API key (returned once)."""
    if not await ctx.store.tenants.create(body.tenant_id):
        raise ApiError(409, "tenant_exists", f"tenant {body.tenant_id!r} exists", "tenant_id")
    api_key, key_id = await ctx.store.tenants.create_key(body.tenant_id)
    return TenantCreatedResponse(tenant_id=body.tenant_id, api_key=api_key, key_id=key_id)


@router.get("/tenants", response_model=TenantListResponse)
async def list_tenants(ctx: Context, _: Admin) -> TenantListResponse:
    """Every tenant with its number of models."""
    tenants = await ctx.store.tenants.list_all()
    return TenantListResponse(tenants=[TenantSummary(tenant_id=t.tenant_id, n_models=t.n_models,
                                                     created_at=t.created_at) for t in tenants])


@router.get("/tenants/{tenant_id}/models", response_model=ModelListResponse,
            responses={404: {"model": ErrorResponse}})
async def list_tenant_models(tenant_id: TenantIdPath, ctx: Context,
                             _: Admin) -> ModelListResponse:
    """Every model of a tenant, read only (what the tenant's ``GET /v1/models`` shows)."""
    if not await ctx.store.tenants.exists(tenant_id):
        raise unknown_tenant(tenant_id)
    return await modelops.list_models(ctx, tenant_id)


@router.delete("/tenants/{tenant_id}", status_code=204, response_class=Response,
               responses={404: {"model": ErrorResponse}})
async def delete_tenant(tenant_id: TenantIdPath, ctx: Context, _: Admin) -> Response:
    """Delete a tenant: its keys stop working, its models, events and keys are gone."""
    if not await ctx.store.tenants.exists(tenant_id):
        raise unknown_tenant(tenant_id)
    model_ids = await ctx.store.tenants.remove(tenant_id)
    await ctx.store.models.delete_many(tenant_id, model_ids)
    for model_id in model_ids:
        ctx.cache.forget(tenant_id, model_id)
        ctx.metrics.forget_model(tenant_id, model_id)
    return Response(status_code=204)


@router.post("/tenants/{tenant_id}/keys", status_code=201, response_model=KeyCreatedResponse,
             responses={404: {"model": ErrorResponse}})
async def create_key(tenant_id: TenantIdPath, ctx: Context, _: Admin) -> KeyCreatedResponse:
    """Issue another API key (rotation: older keys stay valid until revoked)."""
    if not await ctx.store.tenants.exists(tenant_id):
        raise unknown_tenant(tenant_id)
    api_key, key_id = await ctx.store.tenants.create_key(tenant_id)
    return KeyCreatedResponse(api_key=api_key, key_id=key_id)


@router.delete("/tenants/{tenant_id}/keys/{key_id}", status_code=204, response_class=Response,
               responses={404: {"model": ErrorResponse}})
async def revoke_key(tenant_id: TenantIdPath, key_id: KeyIdPath, ctx: Context,
                     _: Admin) -> Response:
    """Revoke a key: it stops working at once."""
    if not await ctx.store.tenants.exists(tenant_id):
        raise unknown_tenant(tenant_id)
    if not await ctx.store.tenants.revoke_key(tenant_id, key_id):
        raise ApiError(404, "unknown_key", f"no key {key_id!r} for tenant {tenant_id!r}")
    return Response(status_code=204)
