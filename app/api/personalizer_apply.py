"""Personalizer's ``apply_from_evaluation``: a learning setting of a succeeded evaluation put
in force through the challenger-promote step.

``POST .../configurations/applyFromEvaluation {"evaluationId", "policyName"}`` names a
``Custom`` or ``OfflineExperimentation`` policy of the evaluation
(:mod:`app.api.personalizer_evaluation`; ``Online Policy`` is the one in force: nothing to
do).  Its configuration is added as a challenger that starts from the model's current
state (the loop keeps what it learned, as ``update_policy`` does: the evaluation replayed a
fresh learner and kept no model) and is promoted at once, old champion dropped: one Lua
step that changes the config and the state together, marks the decision log and keeps the
replaced and the new state as versions (:func:`app.api.challengers.promote`), so the
switch is atomic and can be rolled back.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from app.api.challengers import promote, validated_challenger
from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.api.personalizer_evaluation import answer
from app.api.schemas.challengers import ChallengerCreateRequest, PromoteRequest
from app.api.tenantlimits import limit_reached
from app.evaluation.personalizer import POLICIES, SETTLED
from app.store.challengers import AddRefused
from app.store.models import ModelView


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
    """Put the policy in force (module docstring)."""
    config = await evaluated_config(ctx, view, body.evaluationId, body.policyName)
    if config is None:
        return
    await put_in_force(ctx, view, config, f"applied-{secrets.token_hex(6)}")


async def put_in_force(ctx: ApiContext, view: ModelView, config: dict[str, Any],
                       name: str) -> int:
    """Make ``config`` the loop's learner from its current state, through a challenger
    ``name`` promoted at once; the new snapshot version."""
    snap = await ctx.store.snapshots.load(view.keys)
    if snap is None:
        raise unknown_model(view.config.model_id)
    definition, fresh = validated_challenger(view.config, ChallengerCreateRequest(
        name=name, algorithm=config["algorithm"], params=config["params"]))
    state = _current(snap.state, fresh)
    try:
        await ctx.store.challengers.add(view.keys, definition, state,
                                        ctx.settings.max_challengers_per_model)
    except AddRefused as exc:
        if exc.reason == "full":
            raise limit_reached(ctx, view.tenant, "max_challengers_per_model",
                                "applying a policy adds it as a challenger and promotes "
                                f"it; a model has at most "
                                f"{ctx.settings.max_challengers_per_model}: delete one "
                                "first", "policyName", code="too_many_challengers") from None
        raise unknown_model(view.config.model_id) from None
    promoted = await promote(ctx, view.keys, PromoteRequest(challenger=name,
                                                            previous_as=None))
    return promoted.version


def _current(state: dict[str, np.ndarray], fresh: dict[str, np.ndarray]
             ) -> dict[str, np.ndarray]:
    """The model's learned state when a learner of the new configuration takes it (the same
    arrays and shapes), else the fresh one (another learner starts afresh)."""
    same = set(state) == set(fresh) and all(
        np.shape(state[k]) == np.shape(fresh[k]) for k in fresh)
    return dict(state) if same else fresh
