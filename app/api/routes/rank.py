"""``POST /v1/models/{model_id}/rank``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request

from app.api import deciding
from app.api.decisionrequest import rank_request
from app.api.deps import AuthHeader, ModelIdPath, get_context, require_model
from app.api.responses import OrjsonResponse
from app.api.routing import OrjsonRoute
from app.api.schemas.common import ErrorResponse
from app.api.schemas.rank import RankBatchResponse, RankBody
from app.tasks.rank import RankResponse

router = APIRouter(prefix="/v1/models", tags=["rank"], route_class=OrjsonRoute)
#: The route's path template (also the metrics label of the fast path's answers).
RANK_PATH = "/v1/models/{model_id}/rank"


@router.post(RANK_PATH.removeprefix("/v1/models"), response_model=RankResponse | RankBatchResponse,
             response_model_exclude_none=True,
             responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                        422: {"model": ErrorResponse}})
async def create_ranking(body: Annotated[RankBody, Body()], model_id: ModelIdPath,
                         request: Request, authorization: AuthHeader = None) -> OrjsonResponse:
    """Rank the candidate ``actions`` for the context (one request, or ``requests``); log each
    ranking for its feedback."""
    view = await require_model(request, model_id, authorization)
    return OrjsonResponse(await deciding.rank(await get_context(request), view,
                                              rank_request(body)))
