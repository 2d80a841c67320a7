"""Kept versions of a model and rollback to one of them."""

from __future__ import annotations

from fastapi import APIRouter

from app.api import versions
from app.api.deps import Context, ModelDep
from app.api.schemas.common import ErrorResponse
from app.api.schemas.versions import RollbackRequest, RollbackResponse, VersionsResponse

router = APIRouter(prefix="/v1/models", tags=["versions"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})


@router.get("/{model_id}/versions", response_model=VersionsResponse)
async def list_versions(view: ModelDep, ctx: Context) -> VersionsResponse:
    """The kept versions, newest first, with when each was published and the events the
    model had applied by then."""
    return await versions.list_versions(ctx, view.tenant, view.config.model_id)


@router.post("/{model_id}/rollback", response_model=RollbackResponse,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def rollback(body: RollbackRequest, view: ModelDep, ctx: Context) -> RollbackResponse:
    """Publish a kept version's state (with its algorithm and params) as a new version; the
    trainer goes on learning from it."""
    return await versions.rollback(ctx, view.tenant, view.config, body.version)
