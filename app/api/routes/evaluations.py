"""Policy-evaluation routes: queue an off-policy evaluation on the decision log, read it."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Path

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError
from app.api.evaluating import queue_policy_evaluation
from app.api.responses import OrjsonResponse
from app.api.schemas.common import ErrorResponse
from app.api.schemas.evaluations import EvaluationJob, EvaluationRequest

router = APIRouter(prefix="/v1/models", tags=["evaluations"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})

JobIdPath = Annotated[str, Path(max_length=32, pattern=r"^[A-Za-z0-9_-]{1,32}$")]


@router.post("/{model_id}/evaluations", status_code=202, response_model=EvaluationJob,
             responses={429: {"model": ErrorResponse}})
async def queue_evaluation(body: EvaluationRequest, view: ModelDep,
                           ctx: Context) -> OrjsonResponse:
    """Queue an off-policy evaluation of ``policy`` on the model's decision log (a worker's
    jobs role runs it); 202 with its job id."""
    job_id = await queue_policy_evaluation(ctx, view, body)
    return OrjsonResponse({"job_id": job_id, "status": "queued"}, status_code=202)


@router.get("/{model_id}/evaluations/{job_id}", response_model=EvaluationJob)
async def get_evaluation(job_id: JobIdPath, view: ModelDep, ctx: Context) -> OrjsonResponse:
    """The evaluation's status; once done, the JSON of ``noisyloop evaluate --json`` with it."""
    job = await ctx.store.evaluations.get(view.keys, job_id)
    if job is None:
        raise ApiError(404, "unknown_evaluation", f"no evaluation {job_id!r} (unknown, or "
                       "expired a day after it was queued)", "job_id")
    out: dict[str, Any] = {"job_id": job_id, "status": job.get("status", "queued")}
    if job.get("error"):
        out["error"] = job["error"]
    if job.get("result"):
        out.update(orjson.loads(job["result"]))
    return OrjsonResponse(out)
