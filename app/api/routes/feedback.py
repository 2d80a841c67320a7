"""``POST /v1/models/{model_id}/feedback``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request

from app.api import decisions
from app.api.deps import AuthHeader, ModelIdPath, get_context, require_model
from app.api.errors import unsupported_media_type
from app.api.responses import OrjsonResponse
from app.api.routing import OrjsonRoute
from app.api.schemas.common import ErrorResponse
from app.api.schemas.feedback import (
    FeedbackAcceptedResponse,
    FeedbackBatchResponse,
    FeedbackRequest,
)

router = APIRouter(prefix="/v1/models", tags=["feedback"], route_class=OrjsonRoute)


@router.post("/{model_id}/feedback", status_code=202,
             response_model=FeedbackAcceptedResponse | FeedbackBatchResponse,
             responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                        409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def create_feedback(body: Annotated[FeedbackRequest, Body()], model_id: ModelIdPath,
                          request: Request, authorization: AuthHeader = None) -> OrjsonResponse:
    """Join feedback with its decision exactly once and queue it for the trainer."""
    view = await require_model(request, model_id, authorization)
    if isinstance(body, bytes):  # not read as JSON (its events are validated one by one)
        raise unsupported_media_type(request.headers.get("content-type", ""))
    status, doc = await decisions.feedback(await get_context(request), view, body)
    return OrjsonResponse(doc, status_code=status)
