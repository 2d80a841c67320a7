"""Decision-log route: a model's applied events (and markers) as JSON Lines, paged."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse

from app.api import decisionlog
from app.api.deps import Context, ModelDep
from app.api.schemas.common import ErrorResponse

router = APIRouter(prefix="/v1/models", tags=["decision log"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})


@router.get("/{model_id}/log", response_class=Response,
            responses={200: {"content": {decisionlog.MEDIA_TYPE: {}},
                             "description": "One JSON object per line, oldest first "
                                            "(newest first with `order=desc`); the "
                                            f"`{decisionlog.NEXT_HEADER}` header gives the "
                                            "`after` of the next page."}})
async def get_log(
        view: ModelDep, ctx: Context,
        since: Annotated[str | None, Query(max_length=40, description="applied at or after "
                                           "(ISO 8601, naive = UTC, or Unix seconds)")] = None,
        until: Annotated[str | None, Query(max_length=40, description="applied at or before "
                                           "(ISO 8601 or Unix seconds)")] = None,
        limit: Annotated[int, Query(ge=1, le=decisionlog.MAX_LIMIT)] = decisionlog.DEFAULT_LIMIT,
        after: Annotated[str | None, Query(max_length=46, pattern=decisionlog.POSITION_PATTERN,
                                           description="the previous page's `X-Next-After`")
                         ] = None,
        order: Annotated[Literal["asc", "desc"], Query(
            description="asc: oldest first; desc: newest first (the pages go back in time)")
                         ] = "asc") -> Response:
    """The model's decision log: every applied event with its context, feedback and model
    version, and markers (rollback, promote, reset, drift, drift_recovery), as JSON Lines,
    oldest or newest first; at most `limit` lines and 8 MiB a page, a page past 1 MiB
    streamed as it is read."""
    page = await decisionlog.read_page(
        ctx.store.log, view.keys,
        since_ms=None if since is None else decisionlog.parse_time(since, "since"),
        until_ms=None if until is None else decisionlog.parse_time(until, "until"),
        after=after, limit=limit, newest_first=order == "desc")
    headers = {} if page.next_after is None else {decisionlog.NEXT_HEADER: page.next_after}
    if isinstance(page.body, bytes):
        return Response(page.body, media_type=decisionlog.MEDIA_TYPE, headers=headers)
    return StreamingResponse(page.body, media_type=decisionlog.MEDIA_TYPE, headers=headers)
