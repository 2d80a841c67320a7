"""How a model serves: its mode (``PUT .../mode``) and deferred decisions (``.../activate``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api import modelops
from app.api.deps import Context, ModelDep
from app.api.errors import ApiError
from app.api.schemas.common import EVENT_ID_PATTERN, ErrorResponse
from app.api.schemas.models import ModelResponse
from app.api.schemas.serving import ActivateResponse, ModeRequest

router = APIRouter(prefix="/v1/models", tags=["serving"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})
EventIdPath = Annotated[str, Path(max_length=64, pattern=EVENT_ID_PATTERN,
                                  description="the event_id of a decision made with defer: true")]


@router.put("/{model_id}/mode", response_model=ModelResponse)
async def set_mode(body: ModeRequest, view: ModelDep, ctx: Context) -> ModelResponse:
    """Serve online (the model's own decisions) or as an apprentice (the callers' baselines)
    from now on; the model keeps what it learned."""
    return await modelops.set_mode(ctx, view.tenant, view.config, body.mode)


@router.post("/{model_id}/events/{event_id}/activate", response_model=ActivateResponse,
             responses={409: {"model": ErrorResponse}})
async def activate_event(event_id: EventIdPath, view: ModelDep,
                         ctx: Context) -> ActivateResponse:
    """Activate a decision made with ``defer: true`` (e.g. once it was shown): it then awaits
    feedback for the model's ``wait_seconds`` from now, as any decision."""
    wait = view.config.feedback.wait_seconds
    status = await ctx.store.events.activate(view.keys, event_id, wait,
                                             ctx.settings.context_grace_seconds)
    if status == "unknown":
        raise ApiError(404, "unknown_event", "no such event: never issued, issued for another "
                       "model, or expired", "event_id")
    if status == "active":
        raise ApiError(409, "already_active", "this decision is active already (made without "
                       "defer, or activated before)", "event_id")
    assert isinstance(status, int)
    return ActivateResponse(event_id=event_id, deadline=status)
