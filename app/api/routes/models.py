"""Model routes: create, list, get, delete, reset, snapshot export/import, sync, drift."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api import drift, modelops
from app.api.deps import Context, ModelDep, Tenant
from app.api.schemas.common import ErrorResponse
from app.api.schemas.models import (
    DriftSettings,
    ModelCreateRequest,
    ModelListResponse,
    ModelResponse,
    SnapshotImportRequest,
    SnapshotResponse,
    SyncResponse,
)

router = APIRouter(prefix="/v1/models", tags=["models"],
                   responses={401: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse}}
#: Explicit publishes: also 409 model_changed (a promotion or rollback raced them).
_PUBLISH: dict[int | str, dict[str, Any]] = {**_404, 409: {"model": ErrorResponse}}


@router.post("", status_code=201, response_model=ModelResponse,
             responses={409: {"model": ErrorResponse}})
async def create_model(body: ModelCreateRequest, ctx: Context, tenant: Tenant) -> ModelResponse:
    """Create a model (validated: 422 names the offending field)."""
    return await modelops.create_model(ctx, tenant, body)


@router.get("", response_model=ModelListResponse)
async def list_models(ctx: Context, tenant: Tenant) -> ModelListResponse:
    """Every model of the caller's tenant."""
    return await modelops.list_models(ctx, tenant)


@router.get("/{model_id}", response_model=ModelResponse, responses=_404)
async def get_model(view: ModelDep, ctx: Context) -> ModelResponse:
    """One model with version and stats."""
    return await modelops.describe_model(ctx, view.tenant, view.config.model_id)


@router.delete("/{model_id}", status_code=204, response_class=Response, responses=_404)
async def delete_model(view: ModelDep, ctx: Context) -> Response:
    """Delete the model: config, snapshot, contexts, streams, buffers."""
    model_id = view.config.model_id
    await ctx.store.models.delete(view.tenant, model_id)
    ctx.cache.forget(view.tenant, model_id)
    ctx.metrics.forget_model(view.tenant, model_id)
    return Response(status_code=204)


@router.post("/{model_id}/reset", response_model=ModelResponse, responses=_PUBLISH)
async def reset_model(view: ModelDep, ctx: Context) -> ModelResponse:
    """Weights back to their initial values, under a new version."""
    return await modelops.reset_model(ctx, view.tenant, view.config)


@router.get("/{model_id}/snapshot", response_model=SnapshotResponse, responses=_404)
async def get_snapshot(view: ModelDep, ctx: Context) -> SnapshotResponse:
    """The model's config, version and state arrays (base64 of ``.npy`` bytes)."""
    return SnapshotResponse.model_validate(
        await modelops.export_snapshot(ctx, view.tenant, view.config))


@router.put("/{model_id}/snapshot", response_model=ModelResponse, responses=_PUBLISH)
async def put_snapshot(body: SnapshotImportRequest, view: ModelDep,
                       ctx: Context) -> ModelResponse:
    """Replace the state (422 when shapes or config do not match)."""
    return await modelops.import_snapshot(ctx, view.tenant, view.config, body)


@router.post("/{model_id}/sync", response_model=SyncResponse,
             responses={**_404, 504: {"model": ErrorResponse}})
async def sync_model(view: ModelDep, ctx: Context,
                     timeout: Annotated[float, Query(gt=0, le=300)] = 10.0) -> SyncResponse:
    """Return once every feedback accepted before the call has been applied."""
    return SyncResponse.model_validate(
        await modelops.sync_model(ctx, view.tenant, view.config.model_id, timeout))


@router.put("/{model_id}/drift", response_model=ModelResponse, responses=_404)
async def set_drift(body: DriftSettings, view: ModelDep, ctx: Context) -> ModelResponse:
    """What a detected drift does from the trainer's next batch on: none, alert, recover."""
    await drift.set_drift(ctx, view.tenant, view.config.model_id, body)
    return await modelops.describe_model(ctx, view.tenant, view.config.model_id)
