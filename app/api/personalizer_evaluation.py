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

Other policies (``policies``) and ``enablePolicyOptimization`` are refused naming the
field: a ranking log holds the features of the actions shown, not of every candidate, so
another learner's choice cannot be evaluated on it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from app.api.context import ApiContext
from app.api.errors import ApiError
from app.api.evaluating import queue_policy_evaluation
from app.api.personalizer_importance import ImportanceRequest
from app.api.personalizer_policy import policy_view
from app.api.schemas.evaluations import EvaluationRequest
from app.store.models import ModelView
from app.store.reports import MAX_REPORTS

#: noisyloop's policy, Personalizer's name and source of each evaluated policy.
POLICIES = (("logging", "Online Policy", "Online"), ("uniform", "Random Policy", "Random"))


class LearningSettings(BaseModel):
    """A policy Personalizer would evaluate beside the online one."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=256)
    arguments: str = Field(max_length=4096)


class EvaluationBody(ImportanceRequest):
    """Body of ``create_evaluation``: a named time range and the policies asked for."""

    policies: list[LearningSettings] = Field(default_factory=list, max_length=16)
    enablePolicyOptimization: bool = False


async def create(ctx: ApiContext, view: ModelView, evaluation_id: str,
                 body: EvaluationBody) -> None:
    """Queue the evaluations (module docstring) and keep them under ``evaluation_id``."""
    if body.policies:
        raise ApiError(422, "unsupported_configuration", "evaluating other learning settings "
                       "is not supported: a ranking log holds the shown actions' features, "
                       "not every candidate's (the online and a random policy are evaluated)",
                       "policies")
    if body.enablePolicyOptimization:
        raise ApiError(422, "unsupported_configuration", "policy optimization is not "
                       "supported (it evaluates other learning settings on the log)",
                       "enablePolicyOptimization")
    start, end = body.utc_range()
    held = await ctx.store.named_evaluations.all(view.keys)
    if any(record["id"] == evaluation_id for record in held):
        raise _exists(evaluation_id)
    if len(held) >= MAX_REPORTS:
        raise _full()
    jobs = {}
    for policy, _, source in POLICIES:
        request = EvaluationRequest(policy=policy, since=str(start.timestamp()),
                                    until=str(end.timestamp()))
        jobs[source] = await queue_policy_evaluation(ctx, view, request)
    record = {"id": evaluation_id, "name": body.name, "description": body.description or "",
              "startTime": start.isoformat(), "endTime": end.isoformat(),
              "creationTime": datetime.now(UTC).isoformat(), "evaluationType": "Manual",
              "status": "Running", "jobs": jobs,
              "onlineArguments": policy_view(view.config)["arguments"]}
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


def _entry(name: str, source: str, arguments: str, result: dict[str, Any],
           end: str) -> dict[str, Any]:
    """One policy's ``content.value`` entry from noisyloop's result (module docstring)."""
    snips = result["snips"]
    insufficient = bool(result.get("insufficient_data"))
    summary: dict[str, Any] = {
        "expectedReward": None if insufficient else snips["value"],
        "confidenceInterval": [snips["ci_low"], snips["ci_high"]]}
    point = dict(summary)
    if insufficient:
        summary["insufficientData"] = True
    if result.get("calibration_unreliable"):
        summary["calibrationUnreliable"] = True
    if insufficient or result.get("calibration_unreliable"):
        summary["reason"] = result.get("reason")
    return {"name": name, "arguments": arguments if source == "Online" else "",
            "policySource": source, "slotId": "", "summary": summary,
            "timeseries": {"data": [{"timeStamp": end, **point}]}, "noisyloop": result}


async def answer(ctx: ApiContext, view: ModelView, evaluation_id: str) -> dict[str, Any] | None:
    """The evaluation in Personalizer's shape (None: no such evaluation); its results are
    kept with it once both jobs are done."""
    record = await ctx.store.named_evaluations.get(view.keys, evaluation_id)
    if record is None:
        return None
    if record["status"] == "Running":
        record = await _settle(ctx, view, record)
    return {k: v for k, v in record.items() if k not in ("jobs", "onlineArguments")}


async def _settle(ctx: ApiContext, view: ModelView, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its jobs' outcome when both ended (kept), else as it is."""
    results: dict[str, dict[str, Any]] = {}
    for source, job_id in record["jobs"].items():
        job = await ctx.store.evaluations.get(view.keys, job_id)
        if job is None:
            return await _keep(ctx, view, {**record, "status": "Failed", "description":
                                           f"the {source} policy's evaluation expired"})
        if job["status"] == "failed":
            return await _keep(ctx, view, {**record, "status": "Failed", "description":
                                           f"the {source} policy's evaluation failed: "
                                           f"{job.get('error', '')}"})
        if job["status"] != "done":
            return record
        results[source] = job
    value = [_entry(name, source, record["onlineArguments"],
                    orjson.loads(results[source]["result"]), record["endTime"])
             for _, name, source in POLICIES]
    content = {"startTime": record["startTime"], "endTime": record["endTime"],
               "intervalInMinutes": 0, "value": value}
    return await _keep(ctx, view, {**record, "status": "Succeeded", "content": content})


async def _keep(ctx: ApiContext, view: ModelView, record: dict[str, Any]) -> dict[str, Any]:
    await ctx.store.named_evaluations.replace(view.keys, record["id"], record)
    return record
