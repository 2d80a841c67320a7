"""Queueing an off-policy evaluation of a model's decision log: the checks made before
anything is queued, then the job (the jobs role runs it: :mod:`workers.evaluations`)."""

from __future__ import annotations

from typing import Any, cast

from app.api import decisionlog
from app.api.context import ApiContext
from app.api.errors import ApiError, from_param_error
from app.api.evaluable import CONFIGURATION, configuration_refusal, evaluation_policies
from app.api.modelops import MAX_STATE_BYTES
from app.api.schemas.evaluations import EvaluationRequest, PolicyConfig
from app.api.tenantlimits import check_evaluation_size, queued_limit_reached
from app.evaluation.policies import policy_kind
from app.evaluation.shapes import ConfigShape
from app.evaluation.training import check_config
from app.learners.base import ParamError
from app.learners.config import ModelConfig
from app.learners.proxy import check_noise_rates
from app.store.evaluations import TooManyQueued
from app.store.models import ModelView
from app.tasks import TASKS, get_task


def check_supported(config: ModelConfig, policy: object) -> None:
    """422 ``evaluation_unsupported`` naming what the model's evaluations support
    (:func:`~app.api.evaluable.evaluation_policies`) when they do not take ``policy``
    (before anything is queued)."""
    task = config.task
    if not get_task(task).evaluation_policies:
        evaluated = sorted(name for name, spec in TASKS.items() if spec.evaluation_policies)
        raise ApiError(422, "evaluation_unsupported", f"the service evaluates the decision logs "
                       f"of {' and '.join(evaluated)} models, not of {task} models", "policy")
    supported = evaluation_policies(config)
    kind = policy_kind(policy)
    if kind not in supported:
        shown = policy if isinstance(policy, str) else "a configuration"
        why = configuration_refusal(config) if kind == CONFIGURATION else None
        raise ApiError(422, "evaluation_unsupported", f"a {task} model's decision log is "
                       f"evaluated for the policies {', '.join(supported)}; not {shown}"
                       + (f": {why}" if why else ""), "policy")


async def queue_policy_evaluation(ctx: ApiContext, view: ModelView,
                                  body: EvaluationRequest) -> str:
    """Check ``body`` against the model and its tenant's limits (4xx naming the field) and
    queue it; its job id."""
    check_supported(view.config, body.policy)
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
        shape = cast(ConfigShape, get_task(config.task).log_shape)
        try:
            check_config(request["policy"], config.task, config.n_features,
                         config.n_classes, max_state_bytes=MAX_STATE_BYTES,
                         feedback=shape.feedback, inherited=shape.inherited(config))
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
    try:
        job_id = await ctx.store.evaluations.queue(
            view.keys, request, ctx.settings.max_queued_evaluations_per_model)
    except TooManyQueued as exc:
        raise queued_limit_reached(ctx, view.tenant, exc) from None
    return job_id
