"""Dead-letter routes: list the events the trainer could not apply, drop or retry them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError, unknown_model
from app.api.schemas.common import ErrorResponse
from app.api.schemas.deadletters import (
    MAX_PAGE,
    STREAM_ID_PATTERN,
    DeadLetterItem,
    DeadLetterListResponse,
    DeadLetterRetryResponse,
    DeadLettersDroppedResponse,
)
from app.store.deadletters import ModelGone

router = APIRouter(prefix="/v1/models", tags=["dead letters"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})

EntryIdPath = Annotated[str, Path(max_length=39, pattern=STREAM_ID_PATTERN,
                                  description="the dead letter's `entry_id`")]


def unknown_dead_letter(entry_id: str) -> ApiError:
    return ApiError(404, "unknown_dead_letter", f"no dead letter {entry_id!r} (dropped, "
                    "retried, or never there)", "entry_id")


@router.get("/{model_id}/dead-letters", response_model=DeadLetterListResponse)
async def list_dead_letters(
        view: ModelDep, ctx: Context,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        after: Annotated[str | None, Query(max_length=39, pattern=STREAM_ID_PATTERN,
                                           description="`next_after` of the previous page")
                         ] = None) -> DeadLetterListResponse:
    """The events the trainer could not apply, oldest first, with the reason: at most
    `limit` and 4 MiB of them a page (`next_after` continues)."""
    page = await ctx.store.dead_letters.page(view.keys, limit, after)
    return DeadLetterListResponse(
        dead_letters=[DeadLetterItem.model_validate(d, from_attributes=True) for d in page.items],
        total=page.total, next_after=page.next_after)


@router.delete("/{model_id}/dead-letters", response_model=DeadLettersDroppedResponse)
async def drop_dead_letters(view: ModelDep, ctx: Context) -> DeadLettersDroppedResponse:
    """Drop every dead letter (counted in `stats.dead_letters_dropped`)."""
    return DeadLettersDroppedResponse(dropped=await ctx.store.dead_letters.drop(view.keys))


@router.delete("/{model_id}/dead-letters/{entry_id}", status_code=204,
               response_class=Response)
async def drop_dead_letter(entry_id: EntryIdPath, view: ModelDep, ctx: Context) -> Response:
    """Drop one dead letter: its event will never be applied."""
    if not await ctx.store.dead_letters.drop(view.keys, entry_id):
        raise unknown_dead_letter(entry_id)
    return Response(status_code=204)


@router.post("/{model_id}/dead-letters/{entry_id}/retry", status_code=202,
             response_model=DeadLetterRetryResponse)
async def retry_dead_letter(entry_id: EntryIdPath, view: ModelDep,
                            ctx: Context) -> DeadLetterRetryResponse:
    """Put the event back on the model's event stream: the trainer applies it once, or
    moves it back to the dead letters with the new reason."""
    try:
        stream_id = await ctx.store.dead_letters.retry(view.keys, entry_id)
    except ModelGone:
        raise unknown_model(view.config.model_id) from None
    if stream_id is None:
        raise unknown_dead_letter(entry_id)
    return DeadLetterRetryResponse(entry_id=entry_id, stream_id=stream_id)
