"""Challenger routes: list with estimates, add, remove, promote."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from app.api import challengers
from app.api.deps import Context, ModelDep
from app.api.schemas.challengers import (
    CHALLENGER_NAME_PATTERN,
    ChallengerCreateRequest,
    ChallengersResponse,
    PromoteRequest,
    PromoteResponse,
)
from app.api.schemas.common import ErrorResponse

router = APIRouter(prefix="/v1/models", tags=["challengers"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})
_409: dict[int | str, dict[str, Any]] = {409: {"model": ErrorResponse}}


@router.get("/{model_id}/challengers", response_model=ChallengersResponse)
async def list_challengers(view: ModelDep, ctx: Context) -> ChallengersResponse:
    """The champion's value and each challenger's estimated value against it (95% intervals)."""
    return await challengers.list_challengers(ctx, view.keys, view.config)


@router.post("/{model_id}/challengers", status_code=201, response_model=ChallengersResponse,
             responses=_409)
async def add_challenger(body: ChallengerCreateRequest, view: ModelDep,
                         ctx: Context) -> ChallengersResponse:
    """Add a challenger: another algorithm and params of the model's task, validated like a
    new model (422 names the field); it follows the model's events from now on."""
    return await challengers.add_challenger(ctx, view.keys, view.config, body)


@router.delete("/{model_id}/challengers/{name}", status_code=204, response_class=Response)
async def delete_challenger(
        view: ModelDep, ctx: Context,
        name: Annotated[str, Path(pattern=CHALLENGER_NAME_PATTERN)]) -> Response:
    """Remove a challenger with its state and estimates."""
    await challengers.remove_challenger(ctx, view.keys, name)
    return Response(status_code=204)


@router.post("/{model_id}/promote", response_model=PromoteResponse, responses=_409)
async def promote(body: PromoteRequest, view: ModelDep, ctx: Context) -> PromoteResponse:
    """Make a challenger the champion in one atomic step: its config and state serve from the
    new version on; the old champion becomes the challenger ``previous_as``."""
    return await challengers.promote(ctx, view.keys, body)
