"""Policy-evaluation routes: queue an off-policy evaluation on the decision log, read it."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Path

from app.api import decisionlog
from app.api.deps import Context, ModelDep
from app.api.errors import ApiError, from_param_error
from app.api.modelops import MAX_STATE_BYTES
from app.api.responses import OrjsonResponse
from app.api.schemas.common import ErrorResponse
from app.api.schemas.evaluations import EvaluationJob, EvaluationRequest, PolicyConfig
from app.api.tenantlimits import check_evaluation_size
from app.evaluation.policies import policy_kind
from app.evaluation.training import check_config
from app.learners.base import ParamError
from app.learners.proxy import check_noise_rates
from app.tasks import TASKS, get_task

router = APIRouter(prefix="/v1/models", tags=["evaluations"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
                              422: {"model": ErrorResponse}})


def check_supported(task: str, policy: object) -> None:
    """422 ``evaluation_unsupported`` naming what the task's evaluations support when they do
    not take ``policy`` (before anything is queued)."""
    supported = get_task(task).evaluation_policies
    if not supported:
        evaluated = sorted(name for name, spec in TASKS.items() if spec.evaluation_policies)
        raise ApiError(422, "evaluation_unsupported", f"the service evaluates the decision logs "
                       f"of {' and '.join(evaluated)} models, not of {task} models", "policy")
    if policy_kind(policy) not in supported:
        shown = policy if isinstance(policy, str) else "a configuration"
        raise ApiError(422, "evaluation_unsupported", f"a {task} model's decision log is "
                       f"evaluated for the policies {', '.join(supported)}; not {shown}",
                       "policy")

JobIdPath = Annotated[str, Path(max_length=32, pattern=r"^[A-Za-z0-9_-]{1,32}$")]


@router.post("/{model_id}/evaluations", status_code=202, response_model=EvaluationJob)
async def queue_evaluation(body: EvaluationRequest, view: ModelDep,
                           ctx: Context) -> OrjsonResponse:
    """Queue an off-policy evaluation of ``policy`` on the model's decision log (a worker's
    jobs role runs it); 202 with its job id."""
    check_supported(view.config.task, body.policy)
    check_evaluation_size(ctx, view.tenant, view.config)
    if isinstance(body.policy, str) and body.policy.startswith("fixed:") and \
            get_task(view.config.task).needs_classes and not (
                body.policy.partition(":")[2].isdigit()
                and int(body.policy.partition(":")[2]) < view.config.class_count):
        raise ApiError(422, "invalid_param", f"fixed:N names a label, 0..."
                       f"{view.config.class_count - 1} for this model", "policy")
    request: dict[str, Any] = body.model_dump(exclude={"since", "until"})
    if isinstance(body.policy, PolicyConfig):
        config = view.config
        try:
            check_config(request["policy"], config.task, config.n_features,
                         config.n_classes, max_state_bytes=MAX_STATE_BYTES)
        except ParamError as exc:
            raise from_param_error(exc) from None
    for field, value in (("since", body.since), ("until", body.until)):
        if value is not None:
            request[f"{field}_ms"] = decisionlog.parse_time(value, field)
    if body.rho0 is not None and body.rho1 is not None:
        try:
            check_noise_rates(body.rho0, body.rho1)
        except ParamError as exc:
            raise from_param_error(exc) from None
    job_id = await ctx.store.evaluations.queue(view.keys, request)
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
