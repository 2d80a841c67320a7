"""Personalizer's offline evaluations of a loop, answered by noisyloop's own evaluations.

``PUT .../evaluations/{id}`` with ``name``, ``startTime`` and ``endTime`` queues two
evaluations of the loop's decision log over that range (the jobs role runs them, as
``POST /v1/models/{id}/evaluations`` does): the online policy (``logging``: the decisions
as they were made) and a random one (``uniform``), each corrected for the loop's click
noise.  ``GET`` answers Personalizer's shape: ``status`` ``Running`` until both are done
(``Failed`` with the reason in ``description`` when one failed), then ``Succeeded`` with
one ``content.value`` entry per policy: ``summary.expectedReward`` the SNIPS estimate and
``confidenceInterval`` its 95% interval.  noisyloop's flags come along with their
``reason``: ``insufficientData`` (too few effective events: no point estimate, and the
interval is the one widened to hold whatever the weights) and ``calibrationUnreliable``
(the click-noise rates the rewards were corrected by are not an estimate noisyloop
stands behind); ``noisyloop`` holds the whole result.  The results are kept with the
evaluation once read (the jobs expire after a day).

Other learning settings (``policies``: each a ``name`` and ``arguments``, a learner
configuration as JSON or Vowpal Wabbit arguments, translated as ``update_policy`` translates
them, :mod:`app.api.personalizer_policy`) are evaluated too, each replayed progressively on
the log (:mod:`app.evaluation.rankreplay`: a loop's decisions log every candidate's
features), as ``policySource`` ``Custom``.  ``enablePolicyOptimization`` adds the small set
of :func:`~app.evaluation.personalizer.optimization_set` as ``OfflineExperimentation``, and
``optimalPolicy`` names the policy of largest value among those and the custom ones whose
estimate is not flagged (:func:`~app.evaluation.personalizer.optimal_policy`).
``apply_from_evaluation`` puts a policy of a succeeded evaluation in force
(:mod:`app.api.personalizer_apply`).  Automatic evaluations (``evaluationType`` ``Auto``)
are started and settled by the trainer's auto-optimization (:mod:`workers.autooptimize`);
reading one never settles it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.context import ApiContext
from app.api.errors import ApiError
from app.api.evaluable import configuration_refusal
from app.api.evaluating import queue_policy_evaluation
from app.api.personalizer_importance import ImportanceRequest
from app.api.personalizer_policy import parse_policy, with_policy
from app.api.schemas.evaluations import EvaluationRequest, PolicyConfig
from app.evaluation.personalizer import (
    POLICIES,
    evaluation_record,
    optimization_set,
    other_policy,
    policies,
    succeeded,
)
from app.learners.config import ModelConfig
from app.store.evaluationset import set_outcome
from app.store.models import ModelView
from app.store.reports import MAX_REPORTS


class LearningSettings(BaseModel):
    """A policy Personalizer would evaluate beside the online one."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=256)
    arguments: str = Field(max_length=4096)


class EvaluationBody(ImportanceRequest):
    """Body of ``create_evaluation``: a named time range and the policies asked for."""

    policies: list[LearningSettings] = Field(default_factory=list, max_length=16)
    enablePolicyOptimization: bool = False


def custom_policy(config: ModelConfig, settings: LearningSettings, at: int
                  ) -> dict[str, Any]:
    """The learner configuration of one listed learning setting (422 naming
    ``policies[at]`` and what is wrong)."""
    try:
        policy = parse_policy({"arguments": settings.arguments}, config)
    except ApiError as exc:
        raise ApiError(exc.status, exc.code, exc.message,
                       f"policies[{at}].{exc.field or 'arguments'}") from None
    evaluated = with_policy(config, policy)
    return {"algorithm": evaluated.algorithm, "params": evaluated.params}


async def create(ctx: ApiContext, view: ModelView, evaluation_id: str,
                 body: EvaluationBody) -> None:
    """Queue the evaluations (module docstring) and keep them under ``evaluation_id``."""
    listed = [(s.name, "Custom", custom_policy(view.config, s, i))
              for i, s in enumerate(body.policies)]
    if body.enablePolicyOptimization:
        listed += [(name, "OfflineExperimentation", setting)
                   for name, setting in optimization_set(view.config)]
    others = [other_policy(i, *one) for i, one in enumerate(listed)]
    why = configuration_refusal(view.config)
    if others and why is not None:
        raise ApiError(422, "unsupported_configuration", f"other learning settings are not "
                       f"evaluated on this loop: {why}", "policies"
                       if body.policies else "enablePolicyOptimization")
    names = [o["name"] for o in others]
    if len(set(names)) < len(names) or {n for _, n, _ in POLICIES} & set(names):
        raise ApiError(422, "invalid_param", "each policy needs its own name (the online "
                       "and random policies' too)", "policies")
    if len(POLICIES) + len(others) > ctx.settings.max_queued_evaluations_per_model:
        raise ApiError(429, "limit_reached", f"an evaluation queues one job per policy, and "
                       f"a model holds at most {ctx.settings.max_queued_evaluations_per_model}"
                       ": list fewer policies", "policies")
    start, end = body.utc_range()
    held = await ctx.store.named_evaluations.all(view.keys)
    if any(record["id"] == evaluation_id for record in held):
        raise _exists(evaluation_id)
    if len(held) >= MAX_REPORTS:
        raise _full()
    since, until = str(start.timestamp()), str(end.timestamp())
    jobs = {}
    for policy, _, source in POLICIES:
        jobs[source] = await queue_policy_evaluation(
            ctx, view, EvaluationRequest(policy=policy, since=since, until=until))
    for one in others:
        jobs[one["job"]] = await queue_policy_evaluation(ctx, view, EvaluationRequest(
            policy=PolicyConfig(**one["config"]), since=since, until=until))
    record = evaluation_record(evaluation_id, body.name, body.description or "", start, end,
                               datetime.now(UTC), "Manual", jobs, others, view.config)
    stored = await ctx.store.named_evaluations.add(view.keys, evaluation_id, record)
    if stored == "exists":
        raise _exists(evaluation_id)
    if stored == "full":
        raise _full()


def _exists(evaluation_id: str) -> ApiError:
    return ApiError(409, "conflict", f"an evaluation {evaluation_id!r} exists: delete it "
                    "first or choose another id", "evaluationId")


def _full() -> ApiError:
    return ApiError(429, "limit_reached", f"the loop holds {MAX_REPORTS} evaluations, the "
                    "most it keeps: delete one first", "evaluationId")


async def answer(ctx: ApiContext, view: ModelView, evaluation_id: str) -> dict[str, Any] | None:
    """The evaluation in Personalizer's shape (None: no such evaluation); its results are
    kept with it once every job is done."""
    record = await ctx.store.named_evaluations.get(view.keys, evaluation_id)
    if record is None:
        return None
    if record["status"] == "Running" and record["evaluationType"] == "Manual":
        record = await _settle(ctx, view, record)  # an automatic one's worker settles it
    return {k: v for k, v in record.items() if k not in ("jobs", "onlineArguments", "others")}


async def _settle(ctx: ApiContext, view: ModelView, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its jobs' outcome when all ended (kept), else as it is."""
    outcome = await set_outcome(ctx.store.evaluations, view.keys, record["jobs"],
                                {key: name for key, name, _, _ in policies(record)})
    if outcome.status == "running":
        return record
    if outcome.status == "failed":
        return await _keep(ctx, view, {**record, "status": "Failed",
                                       "description": outcome.why})
    return await _keep(ctx, view, succeeded(record, outcome.results))


async def _keep(ctx: ApiContext, view: ModelView, record: dict[str, Any]) -> dict[str, Any]:
    await ctx.store.named_evaluations.replace(view.keys, record["id"], record)
    return record
