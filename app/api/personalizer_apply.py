"""Personalizer's ``apply_from_evaluation``: a learning setting of a succeeded evaluation put
in force through the challenger-promote step.

``POST .../configurations/applyFromEvaluation {"evaluationId", "policyName"}`` names a
``Custom`` or ``OfflineExperimentation`` policy of the evaluation
(:mod:`app.api.personalizer_evaluation`; ``Online Policy`` is the one in force: nothing to
do).  Its configuration is added as a challenger that starts from the model's current
state (the loop keeps what it learned, as ``update_policy`` does: the evaluation replayed a
fresh learner and kept no model) and is promoted at once, old champion dropped
(:func:`app.store.switching.switch_setting`): one Lua step that changes the config and the
state together, marks the decision log and keeps the replaced and the new state as
versions, so the switch is atomic and can be rolled back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.context import ApiContext
from app.api.errors import ApiError
from app.api.personalizer_evaluation import answer
from app.evaluation.personalizer import POLICIES, SETTLED
from app.store.models import ModelView
from app.store.switching import switch_setting


class ApplyBody(BaseModel):
    """Body of ``apply_from_evaluation``."""

    model_config = ConfigDict(extra="forbid")

    evaluationId: str = Field(max_length=256)
    policyName: str = Field(max_length=256)


async def evaluated_config(ctx: ApiContext, view: ModelView, evaluation_id: str,
                           policy_name: str) -> dict[str, Any] | None:
    """The configuration of ``policy_name`` in the succeeded evaluation ``evaluation_id``
    (None: the online policy); 404 naming the field that names nothing, 409 unless the
    evaluation succeeded."""
    found = await answer(ctx, view, evaluation_id)
    if found is None:
        raise ApiError(404, "not_found", f"no evaluation {evaluation_id!r}", "evaluationId")
    if found["status"] not in SETTLED:
        raise ApiError(409, "conflict", f"evaluation {evaluation_id!r} is "
                       f"{found['status']}: a policy is applied from a succeeded one",
                       "evaluationId")
    if policy_name == POLICIES[0][1]:
        return None
    record = await ctx.store.named_evaluations.get(view.keys, evaluation_id)
    others = [] if record is None else record.get("others", [])
    config: dict[str, Any] | None = next(
        (o["config"] for o in others if o["name"] == policy_name), None)
    if config is None:
        names = [POLICIES[0][1], *(o["name"] for o in others)]
        raise ApiError(404, "not_found", f"evaluation {evaluation_id!r} has no policy "
                       f"{policy_name!r:.80} (one of {', '.join(names)})", "policyName")
    return config


async def apply(ctx: ApiContext, view: ModelView, body: ApplyBody) -> None:
    """Put the policy in force (module docstring); 409 when the model changed meanwhile."""
    config = await evaluated_config(ctx, view, body.evaluationId, body.policyName)
    if config is None:
        return
    if await switch_setting(ctx.store, view.keys, config, "applied") is None:
        raise ApiError(409, "conflict", "the loop changed while the policy was applied; "
                       "try again", "policyName")
    ctx.cache.forget(view.tenant, view.config.model_id)
