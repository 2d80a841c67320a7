"""``POST /v1/models/{model_id}/predict``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api import deciding
from app.api.decisionrequest import predict_request
from app.api.deps import AuthHeader, ModelIdPath, bearer_token, get_context
from app.api.responses import OrjsonResponse
from app.api.routing import OrjsonRoute
from app.api.schemas.common import ErrorResponse
from app.api.schemas.predict import Prediction, PredictionBatchResponse, PredictRequest

router = APIRouter(prefix="/v1/models", tags=["predict"], route_class=OrjsonRoute)
#: The route's path template (also the metrics label of the fast path's answers).
PREDICT_PATH = "/v1/models/{model_id}/predict"


@router.post(PREDICT_PATH.removeprefix("/v1/models"),
             response_model=Prediction | PredictionBatchResponse, response_model_exclude_none=True,
             responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                        422: {"model": ErrorResponse}})
async def create_prediction(body: PredictRequest, model_id: ModelIdPath, request: Request,
                            authorization: AuthHeader = None) -> OrjsonResponse:
    """Decide for ``features`` (one) or ``instances`` (many); log each decision for feedback."""
    return OrjsonResponse(await deciding.predict_for_key(
        await get_context(request), bearer_token(authorization), model_id, predict_request(body)))
