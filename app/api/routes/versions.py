"""Kept versions of a model and rollback to one of them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api import versions
from app.api.deps import Context, ModelDep
from app.api.schemas.common import ErrorResponse
from app.api.schemas.models import MAX_JSON_INT
from app.api.schemas.versions import (
    MAX_VERSIONS_PAGE,
    RollbackRequest,
    RollbackResponse,
    VersionsResponse,
)

router = APIRouter(prefix="/v1/models", tags=["versions"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})


@router.get("/{model_id}/versions", response_model=VersionsResponse,
            responses={422: {"model": ErrorResponse}})
async def list_versions(
        view: ModelDep, ctx: Context,
        limit: Annotated[int, Query(ge=1, le=MAX_VERSIONS_PAGE)] = MAX_VERSIONS_PAGE,
        before: Annotated[int | None, Query(ge=1, le=MAX_JSON_INT, description=(
            "only versions older than this (the previous page's `next_before`)"))] = None
        ) -> VersionsResponse:
    """The kept versions, newest first, with when each was published and the events the
    model had applied by then: at most `limit` and 4 MiB of them a page."""
    return await versions.list_versions(ctx, view.tenant, view.config.model_id, limit, before)


@router.post("/{model_id}/rollback", response_model=RollbackResponse,
             responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def rollback(body: RollbackRequest, view: ModelDep, ctx: Context) -> RollbackResponse:
    """Publish a kept version's state (with its algorithm and params) as a new version; the
    trainer goes on learning from it."""
    return await versions.rollback(ctx, view.tenant, view.config, body.version)
