"""The quality series route: a model's per-window rewards, noise rates and load."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import Context, ModelDep
from app.api.schemas.common import ErrorResponse
from app.api.schemas.series import SeriesPoint, SeriesResponse
from app.store.paging import take_page
from app.store.series import SERIES_MAX

router = APIRouter(prefix="/v1/models", tags=["series"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})


@router.get("/{model_id}/series", response_model=SeriesResponse)
async def get_series(view: ModelDep, ctx: Context,
                     limit: Annotated[int, Query(ge=1, le=SERIES_MAX,
                                                 description="newest points to return")
                                      ] = SERIES_MAX,
                     before: Annotated[float | None, Query(
                         ge=0, le=1e11, allow_inf_nan=False,
                         description="only points older than this (the previous page's "
                                     "`next_before`)")] = None) -> SeriesResponse:
    """The model's quality series, oldest first: one point per trainer window (about every
    10 s while it learns), the newest 2,000 kept; a page holds the newest `limit` points
    (before `before`) and at most 4 MiB of them, `next_before` reads on back in time."""
    points, more = await take_page(ctx.store.series.newest(view.keys, before), limit)
    points.reverse()
    return SeriesResponse(points=[SeriesPoint.model_validate(p) for p in points],
                          next_before=points[0]["t"] if more and points else None)
