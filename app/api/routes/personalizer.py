"""Azure AI Personalizer's routes: ``{base}/v1/models/{model_id}/personalizer/...``.

The SDKs' ``endpoint`` is ``{base}/v1/models/{model_id}``: ``azure-ai-personalizer``
calls ``{endpoint}/personalizer/rank?api-version=2022-09-01-preview``,
``azure-cognitiveservices-personalizer`` calls ``{endpoint}/personalizer/v1.0/rank``; both
send the tenant's API key as ``Ocp-Apim-Subscription-Key`` (``Authorization: Bearer`` works
too). Each call is translated (:mod:`app.api.personalizer`) into noisyloop's own: a Rank is
a one-slot rank of the actions not excluded, a multi-slot Rank a ranking whose positions
are the slots and its Reward one value per position (:mod:`app.api.personalizer_slots`), a
Reward the rank feedback of the chosen action (exactly once: with Personalizer's ``earliest``
aggregation a later reward is ignored and counted as a duplicate, with ``sum`` the rewards
add up until the reward wait passed, :mod:`app.api.openfeedback`; one sent before a
deferred decision's activation is kept until then), an Activate the activation of a
deferred decision, the service configuration a view of the model's settings
(:mod:`app.api.personalizer_config`), the policy a view of its learner configuration
(:mod:`app.api.personalizer_policy`), the model's export, import, reset and properties its
snapshot, reset and times, the log's properties and deletion its decision log's time range
and clearing, evaluations noisyloop's own evaluations of that log
(:mod:`app.api.personalizer_evaluation`; applying a policy of one is a challenger promoted at
once, :mod:`app.api.personalizer_apply`), and feature importances reports over it
(:mod:`app.api.personalizer_importance`). A client's ``eventId`` names its decision through
:class:`~app.store.aliases.AliasStore`. Every error is answered in Personalizer's shape; a
call not served yet is refused naming it.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from app.api import decisions, modelops, personalizer_apply, personalizer_evaluation
from app.api.apprentice import check_mode, in_apprentice_mode
from app.api.configchange import change_config
from app.api.deciding import decide_log_answer
from app.api.decisionrequest import DecisionRequest
from app.api.deps import authorize_model, bearer_token, get_context
from app.api.errors import (
    ApiError,
    from_param_error,
    is_json_media_type,
    unknown_model,
    unsupported_media_type,
    validation_error,
)
from app.api.personalizer import (
    API_VERSION,
    RankRequest,
    RewardRequest,
    decision_request,
    error_response,
    explanation,
    parse,
    rank_response,
    unknown_call,
)
from app.api.personalizer_config import configured, format_duration, service_configuration
from app.api.personalizer_evaluation import EvaluationBody
from app.api.personalizer_importance import ImportanceRequest, create_report, record_names
from app.api.personalizer_policy import (
    Policy,
    default_policy,
    parse_policy,
    policy_answer,
    policy_view,
    with_policy,
)
from app.api.personalizer_slots import (
    MultiSlotRankRequest,
    MultiSlotRewardRequest,
    multi_slot_request,
    multi_slot_response,
    slot_rewards,
)
from app.api.ranking import model_slots, rank_input
from app.api.responses import OrjsonResponse
from app.api.schemas.models import SnapshotImportRequest, SnapshotResponse
from app.api.versions import reconfigure
from app.evaluation.personalizer import policy_results
from app.fields import NamedFeatures
from app.learners.base import CandidateRanker, Learner, ParamError
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.learners.registry import check_param_types, learner_class
from app.store import STORE_ERRORS
from app.store.aliases import Alias
from app.store.models import ModelView
from app.tasks import get_task
from app.tasks.rank import RankFeedback

#: Out of noisyloop's OpenAPI schema: these routes are Personalizer's API, which its SDKs
#: describe, and their bodies are read by :mod:`app.api.personalizer`.
router = APIRouter(prefix="/v1/models", tags=["personalizer"], include_in_schema=False)
#: The two SDK generations' route prefixes below ``{endpoint}``.
PREFIXES = ("/{model_id}/personalizer", "/{model_id}/personalizer/v1.0")
#: The header both SDKs send the key in.
KEY_HEADER = "ocp-apim-subscription-key"


def _token(request: Request) -> str:
    key = request.headers.get(KEY_HEADER)
    if key:
        return key.strip()
    return bearer_token(request.headers.get("authorization"))


async def _view(request: Request, model_id: str) -> ModelView:
    """The model for the request's key (401/404 as noisyloop's routes), after the
    api-version check of the newer SDK's routes."""
    version = request.query_params.get("api-version")
    if version is not None and version != API_VERSION:
        raise ApiError(422, "invalid_api_version", f"api-version {version!r} is not served; "
                       f"use {API_VERSION}", "api-version")
    return await authorize_model(await get_context(request), _token(request), model_id)


async def _json(request: Request) -> Any:
    content_type = request.headers.get("content-type")
    if not is_json_media_type(content_type):
        raise unsupported_media_type(content_type or "")
    raw = await request.body()
    if not raw:
        raise ApiError(422, "invalid_request", "a JSON body is required")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(422, "invalid_json", f"body is not valid JSON: {exc}") from None


def _alias_seconds(view: ModelView, grace: int) -> int:
    """How long an event id names its decision: until its feedback can no longer come (a
    deferred decision may be activated up to its wait and grace after the rank, and then
    waits once more)."""
    return 2 * int(view.config.feedback.wait_seconds) + grace


async def _ranker(request: Request, view: ModelView) -> tuple[Learner, int]:
    """The loop's learner and version; 400 unless the model ranks candidates."""
    if not view.config.learner_class.ranks_candidates:
        raise ApiError(422, "wrong_task", f"model {view.config.model_id!r} is a "
                       f"{view.config.task!r} model: Personalizer's rank needs a model that "
                       "ranks candidates (create one with \"preset\": \"personalizer\")",
                       "model_id")
    found = await (await get_context(request)).cache.get(view)
    if found is None:
        raise unknown_model(view.config.model_id)
    return found


async def _decide_named(request: Request, view: ModelView, learner: Learner, version: int,
                        native: DecisionRequest, event_id: str | None,
                        slot_ids: Sequence[str] = ()) -> tuple[str, list[dict[str, Any]]]:
    """Decide and log ``native`` under the client's ``event_id`` (409 if an earlier rank
    took it; None: noisyloop's own event id names it), and bind that id to the decision (a
    multi-slot one: with the action of each of ``slot_ids``).  Returns the event id and
    the ranking (one entry per slot filled)."""
    ctx = await get_context(request)
    ttl = _alias_seconds(view, ctx.settings.context_grace_seconds)
    if event_id is not None and not await ctx.store.aliases.claim(view.keys, event_id, ttl):
        raise ApiError(409, "duplicate_event_id", f"event id {event_id!r} was given to "
                       "an earlier rank of this model: each rank needs its own", "eventId")
    try:
        doc = await decide_log_answer(ctx, view.tenant, view.config, learner, version, native,
                                      candidates=view.challenged)
        assert doc is not None  # unguarded: always logged
        ranking: list[dict[str, Any]] = doc["ranking"]
        named = event_id or doc["event_id"]
        slots = tuple((s, r["id"]) for s, r in zip(slot_ids, ranking, strict=False))
        await ctx.store.aliases.bind(view.keys, named,
                                     Alias(doc["event_id"], ranking[0]["id"], slots), ttl)
    except BaseException:
        # the client is told the rank failed, so its retry with the same id must be free; a
        # decision logged before the failure times out with the default reward, as any
        if event_id is not None:
            with contextlib.suppress(*STORE_ERRORS):
                await ctx.store.aliases.release(view.keys, event_id)
        raise
    await record_names(ctx, view, native)
    return named, ranking


async def rank_single_slot(request: Request, model_id: str) -> Response:
    """Rank: choose one of the actions not excluded for the context, logged for its reward."""
    view = await _view(request, model_id)
    body = cast(RankRequest, parse(RankRequest, await _json(request)))
    config = view.config
    learner, version = await _ranker(request, view)
    apprentice = in_apprentice_mode(config)
    native, excluded = decision_request(body, apprentice)
    candidates = cast(list, native.candidates)[0]
    one = rank_input(native.contexts[0], candidates, native.options[0], config, "")
    ranker = cast(CandidateRanker, learner)
    probabilities = (None if apprentice else
                     ranker.first_slot_probabilities(one.x, one.actions))
    explained = None
    if config.explain_scores and learner.explains_scores:
        explained = explanation(
            cast(NamedFeatures, native.contexts[0]).named,
            [(i, cast(NamedFeatures, f).named)
             for i, f in zip(candidates.ids, candidates.features, strict=True)],
            ranker.feature_effects(one.x, one.actions))
    event_id, ranking = await _decide_named(request, view, learner, version, native,
                                            body.eventId)
    top = ranking[0]
    return OrjsonResponse(rank_response(event_id, candidates.ids, top["id"],
                                        top["probability"], probabilities, excluded,
                                        explained),
                          status_code=201)


async def rank_multi_slot(request: Request, model_id: str) -> Response:
    """Multi-slot rank: a ranking of the actions into the slots, one distinct action per
    slot among those it allows, each slot deciding with its own features
    (:mod:`app.api.personalizer_slots`)."""
    view = await _view(request, model_id)
    body = cast(MultiSlotRankRequest, parse(MultiSlotRankRequest, await _json(request)))
    config = view.config
    learner, version = await _ranker(request, view)
    if len(body.slots) > model_slots(config):
        raise ApiError(422, "invalid_slots", f"{len(body.slots)} slots, but the loop fills "
                       f"{model_slots(config)} at most: create it with \"slots\": "
                       f"{len(body.slots)} (or more)", "slots")
    native = multi_slot_request(body, in_apprentice_mode(config))
    slot_ids = [s.id for s in body.slots]
    event_id, ranking = await _decide_named(request, view, learner, version, native,
                                            body.eventId, slot_ids)
    return OrjsonResponse(multi_slot_response(event_id, slot_ids, ranking), status_code=201)


async def _decision(request: Request, view: ModelView, event_id: str) -> Alias:
    found = await (await get_context(request)).store.aliases.resolve(view.keys, event_id)
    if found is None:
        raise ApiError(404, "unknown_event", f"no event {event_id!r}: never ranked by this "
                       "model, or past its reward wait time", "eventId")
    return found


async def _learn_reward(request: Request, view: ModelView, found: Alias,
                        rewards: dict[str, float]) -> str:
    """Join ``rewards`` (by action id shown) as the decision's feedback: "ok", "duplicate"
    (a reward was learned before: ignored, counted) or "not_activated"."""
    feedback = RankFeedback(event_id=found.event_id, rewards=rewards)
    try:
        await decisions.feedback(await get_context(request), view, feedback)
    except ApiError as exc:
        if exc.code == "duplicate_feedback":
            return "duplicate"
        if exc.code == "not_activated":
            return "not_activated"
        raise
    return "ok"


async def _reward(request: Request, view: ModelView, event_id: str, found: Alias,
                  rewards: dict[str, float]) -> Response:
    """Learn ``rewards`` for the event as the loop aggregates its rewards (``earliest``:
    the first counts, a later one is ignored; ``sum``: they add up until the reward wait
    passed).  A reward of a deferred decision not activated yet is kept, and learned when
    it is activated.

    The reward is kept before the decision is checked again: if it is still waiting for
    its activation, the activation comes later and takes the kept rewards; if it was
    activated meanwhile, this call and the activation both try to take them, and whoever
    does learns each exactly once.
    """
    if await _learn_reward(request, view, found, rewards) == "not_activated":
        ctx = await get_context(request)
        ttl = _alias_seconds(view, ctx.settings.context_grace_seconds)
        await ctx.store.aliases.keep_reward(view.keys, event_id, rewards, ttl)
        if not await ctx.store.events.deferred(view.keys, found.event_id):
            await _learn_kept(request, view, event_id, found)
    return Response(status_code=204)


async def _learn_kept(request: Request, view: ModelView, event_id: str, found: Alias) -> None:
    """Take the rewards kept for the event and learn them in the order they came."""
    ctx = await get_context(request)
    for kept in await ctx.store.aliases.take_rewards(view.keys, event_id):
        await _learn_reward(request, view, found, kept)


async def reward_single_slot_event(request: Request, model_id: str, event_id: str) -> Response:
    """Reward: the reward of the event's ``rewardActionId`` (:func:`_reward`)."""
    view = await _view(request, model_id)
    body = cast(RewardRequest, parse(RewardRequest, await _json(request)))
    found = await _decision(request, view, event_id)
    if found.slots:
        raise ApiError(422, "invalid_reward", f"event {event_id!r} was ranked multi-slot: "
                       "reward its slots with reward_multi_slot "
                       "(multislot/events/{eventId}/reward)", "eventId")
    return await _reward(request, view, event_id, found, {found.action_id: body.value})


async def reward_multi_slot_event(request: Request, model_id: str, event_id: str) -> Response:
    """Multi-slot reward: the reward of each slot named (:func:`_reward`; a slot not named
    gets the default reward 0)."""
    view = await _view(request, model_id)
    body = cast(MultiSlotRewardRequest, parse(MultiSlotRewardRequest, await _json(request)))
    found = await _decision(request, view, event_id)
    return await _reward(request, view, event_id, found,
                         slot_rewards(body, event_id, found.slots))


async def activate_event(request: Request, model_id: str, event_id: str) -> Response:
    """Activate (single- or multi-slot): a decision ranked with ``deferActivation`` now
    awaits its reward, and learns the rewards kept for it, if some came first (a decision
    not deferred, or activated before, is left as it is)."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    found = await _decision(request, view, event_id)
    status = await ctx.store.events.activate(view.keys, found.event_id,
                                             view.config.feedback.wait_seconds,
                                             ctx.settings.context_grace_seconds)
    if status == "unknown":
        raise ApiError(404, "unknown_event", f"event {event_id!r} can no longer be activated: "
                       "it expired", "eventId")
    await _learn_kept(request, view, event_id, found)
    return Response(status_code=204)


async def get_service_configuration(request: Request, model_id: str) -> Response:
    """Service configuration: the model's settings under Personalizer's names."""
    view = await _view(request, model_id)
    age = (await get_context(request)).settings.worker.log_max_age
    return OrjsonResponse(service_configuration(view.config, age))


async def update_service_configuration(request: Request, model_id: str) -> Response:
    """Update service configuration: the settings that map onto the model's (a change of
    any other is refused naming it); answers the configuration now in force."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    body = await _json(request)
    age = ctx.settings.worker.log_max_age

    def change(current: ModelConfig) -> ModelConfig | None:
        new = configured(current, body, age)
        check_mode(new.mode, get_task(new.task), new.learner_class)
        try:
            build_learner(new)
        except ParamError as exc:
            raise ApiError(422, "invalid_configuration", exc.message,
                           "explorationPercentage") from None
        return None if new.as_dict() == current.as_dict() else new

    stored = await change_config(ctx, view.tenant, model_id, change)
    return OrjsonResponse(service_configuration(stored, age))


async def get_policy(request: Request, model_id: str) -> Response:
    """Policy: the model's learner configuration (:mod:`app.api.personalizer_policy`)."""
    view = await _view(request, model_id)
    return OrjsonResponse(policy_view(view.config))


async def _put_policy(request: Request, view: ModelView, policy: Policy) -> Response:
    """Put ``policy`` in force: checked against the model's learner, stored, and the
    model's state republished under it (what it learned is kept)."""
    cls = learner_class(view.config.task, policy.algorithm)
    try:
        check_param_types(cls, policy.params)
        build_learner(with_policy(view.config, policy))
    except ParamError as exc:
        raise from_param_error(exc, "arguments.") from None
    stored, _ = await reconfigure(await get_context(request), view.tenant,
                                  view.config.model_id,
                                  lambda current: with_policy(current, policy))
    return OrjsonResponse(policy_answer(stored, policy))


async def update_policy(request: Request, model_id: str) -> Response:
    """Update policy: the learner configuration a JSON ``arguments`` or Vowpal Wabbit's
    arguments translate into, put in force."""
    view = await _view(request, model_id)
    return await _put_policy(request, view, parse_policy(await _json(request), view.config))


async def reset_policy(request: Request, model_id: str) -> Response:
    """Reset policy: the params a new model of the same kind and preset starts from."""
    view = await _view(request, model_id)
    return await _put_policy(request, view, default_policy(view.config))


async def get_model_properties(request: Request, model_id: str) -> Response:
    """Model properties: when the model was created and last changed (UTC, ISO 8601)."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    model = await modelops.describe_model(ctx, view.tenant, model_id)
    return OrjsonResponse({"creationTime": model.created_at,
                           "lastModifiedTime": model.updated_at or model.created_at})


async def export_model(request: Request, model_id: str) -> Response:
    """Export model: the model's snapshot (noisyloop's ``GET .../snapshot`` JSON) as bytes,
    which import takes back."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    if request.query_params.get("signed", "false").lower() != "false":
        raise ApiError(422, "unsupported_configuration", "signed exports are not supported: "
                       "export with signed=false", "signed")
    snapshot = await modelops.export_snapshot(ctx, view.tenant, view.config)
    return Response(SnapshotResponse.model_validate(snapshot).model_dump_json(),
                    media_type="application/octet-stream")


async def import_model(request: Request, model_id: str) -> Response:
    """Import model: a snapshot exported from a model of the same kind (a versioned, atomic
    import, as ``PUT .../snapshot``)."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    try:
        body = SnapshotImportRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise validation_error(exc.errors(), model=SnapshotImportRequest) from None
    await modelops.import_snapshot(ctx, view.tenant, view.config, body)
    return Response(status_code=204)


async def reset_model(request: Request, model_id: str) -> Response:
    """Reset model: the initial weights under a new version (the decision log is kept)."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    await modelops.reset_model(ctx, view.tenant, view.config)
    return Response(status_code=204)


async def get_log_properties(request: Request, model_id: str) -> Response:
    """Log properties: the times of the decision log's first and last entries (UTC, ISO
    8601); no ``dateRange`` while the log is empty."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    ends = [await ctx.store.log.read(view.keys, count=1, newest_first=newest)
            for newest in (False, True)]
    if not ends[0] or not ends[1]:
        return OrjsonResponse({})
    first, last = (datetime.fromtimestamp(end[0].applied_ms / 1000, UTC).isoformat()
                   for end in ends)
    return OrjsonResponse({"dateRange": {"from": first, "to": last}})


async def delete_logs(request: Request, model_id: str) -> Response:
    """Delete logs: clear the model's decision log (what the model learned stays)."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    await ctx.store.log.clear(view.keys)
    return Response(status_code=204)


async def create_feature_importance(request: Request, model_id: str,
                                    feature_importance_id: str) -> Response:
    """Create feature importance: a report over a time range of the log
    (:mod:`app.api.personalizer_importance`), computed at once."""
    view = await _view(request, model_id)
    body = cast(ImportanceRequest, parse(ImportanceRequest, await _json(request)))
    await create_report(await get_context(request), view, feature_importance_id, body)
    return Response(status_code=200)


async def _report(request: Request, view: ModelView, report_id: str) -> dict[str, Any]:
    found = await (await get_context(request)).store.importances.get(view.keys, report_id)
    if found is None:
        raise ApiError(404, "not_found", f"no feature importance {report_id!r}",
                       "featureImportanceId")
    return found


async def get_feature_importance(request: Request, model_id: str,
                                 feature_importance_id: str) -> Response:
    """Get feature importance: one report."""
    view = await _view(request, model_id)
    return OrjsonResponse(await _report(request, view, feature_importance_id))


async def list_feature_importances(request: Request, model_id: str) -> Response:
    """List feature importances: the reports, oldest first (``skip``, ``top``)."""
    view = await _view(request, model_id)
    reports = await (await get_context(request)).store.importances.all(view.keys)
    return _listed(request, reports)


def _listed(request: Request, items: list[dict[str, Any]]) -> Response:
    """Personalizer's list answer, ``{"value": [...]}``, of ``items[skip:skip + top]``."""
    skip, top = (_count_param(request, name) for name in ("skip", "top"))
    start = skip or 0
    return OrjsonResponse({"value": items[start:None if top is None else start + top]})


def _count_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not raw.isdigit():
        raise ApiError(422, "invalid_param", f"{name} must be a whole number >= 0, got "
                       f"{raw!r:.40}", name)
    return int(raw)


async def delete_feature_importance(request: Request, model_id: str,
                                    feature_importance_id: str) -> Response:
    """Delete feature importance: remove one report."""
    view = await _view(request, model_id)
    await _report(request, view, feature_importance_id)
    await (await get_context(request)).store.importances.delete(view.keys,
                                                                feature_importance_id)
    return Response(status_code=204)


async def create_evaluation(request: Request, model_id: str, evaluation_id: str) -> Response:
    """Create evaluation: the online and a random policy evaluated on the log over a time
    range (:mod:`app.api.personalizer_evaluation`), queued for the jobs role."""
    view = await _view(request, model_id)
    body = cast(EvaluationBody, parse(EvaluationBody, await _json(request)))
    await personalizer_evaluation.create(await get_context(request), view, evaluation_id,
                                         body)
    return Response(status_code=200)


async def create_evaluation_v1(request: Request, model_id: str) -> Response:
    """Create evaluation as Personalizer v1.0 does: ``POST evaluations``, the search asked as
    ``enableOfflineExperimentation``, the id made here; 201 with the evaluation."""
    view = await _view(request, model_id)
    raw = await _json(request)
    v1_name, name = "enableOfflineExperimentation", "enablePolicyOptimization"
    renamed = isinstance(raw, dict) and name not in raw and v1_name in raw
    if renamed:
        raw = {(name if k == v1_name else k): v for k, v in raw.items()}
    try:
        body = cast(EvaluationBody, parse(EvaluationBody, raw))
    except ApiError as exc:  # named as the caller sent it
        if renamed and exc.field == name:
            exc.field = v1_name
            exc.message = exc.message.replace(name, v1_name)
        raise
    evaluation_id = str(uuid.uuid4())
    await personalizer_evaluation.create(await get_context(request), view, evaluation_id,
                                         body)
    found = _v1(_shaped(await _evaluation(request, view, evaluation_id)))
    return OrjsonResponse(found, status_code=201,
                          headers={"Location": f"{request.url.path}/{evaluation_id}"})


async def _evaluation(request: Request, view: ModelView, evaluation_id: str) -> dict[str, Any]:
    found = await personalizer_evaluation.answer(await get_context(request), view,
                                                 evaluation_id)
    if found is None:
        raise ApiError(404, "not_found", f"no evaluation {evaluation_id!r}", "evaluationId")
    return found


def _shaped(record: dict[str, Any]) -> dict[str, Any]:
    """An evaluation with, once it has results, Personalizer v1.0's ``policyResults`` beside
    ``content`` (one window: the evaluation's range)."""
    if "content" not in record:
        return record
    span = (datetime.fromisoformat(record["endTime"])
            - datetime.fromisoformat(record["startTime"])).total_seconds()
    return {**record, "policyResults": policy_results(record, format_duration(span))}


#: An evaluation's ``status`` as Personalizer v1.0 spells it (its later API's on the left).
V1_STATUS = {"Succeeded": "completed", "Running": "pending", "Failed": "failed",
             "NotSubmitted": "notSubmitted", "Timeout": "timeout",
             "OptimalPolicyApplied": "optimalPolicyApplied",
             "OnlinePolicyRetained": "onlinePolicyRetained"}


def _v1(record: dict[str, Any]) -> dict[str, Any]:
    """An evaluation answered on a v1.0 route: its status in v1.0's spelling."""
    return {**record, "status": V1_STATUS.get(record["status"], record["status"])}


async def get_evaluation(request: Request, model_id: str, evaluation_id: str) -> Response:
    """Get evaluation: its status and, once done, each policy's result."""
    view = await _view(request, model_id)
    return OrjsonResponse(_shaped(await _evaluation(request, view, evaluation_id)))


async def get_evaluation_v1(request: Request, model_id: str, evaluation_id: str) -> Response:
    """Get evaluation as Personalizer v1.0 answers it (:func:`_v1`)."""
    view = await _view(request, model_id)
    return OrjsonResponse(_v1(_shaped(await _evaluation(request, view, evaluation_id))))


async def _evaluations(request: Request, model_id: str) -> list[dict[str, Any]]:
    """The loop's evaluations (:func:`_shaped`), oldest first."""
    ctx = await get_context(request)
    view = await _view(request, model_id)
    found = [await personalizer_evaluation.answer(ctx, view, record["id"])
             for record in await ctx.store.named_evaluations.all(view.keys)]
    return [_shaped(e) for e in found if e is not None]


async def list_evaluations(request: Request, model_id: str) -> Response:
    """List evaluations: each one's status and results, oldest first (``skip``, ``top``)."""
    return _listed(request, await _evaluations(request, model_id))


async def list_evaluations_v1(request: Request, model_id: str) -> Response:
    """List evaluations as Personalizer v1.0 answers it: a bare array, oldest first, each
    as :func:`get_evaluation_v1` answers it."""
    return OrjsonResponse([_v1(e) for e in await _evaluations(request, model_id)])


async def delete_evaluation(request: Request, model_id: str, evaluation_id: str) -> Response:
    """Delete evaluation: forget it (its jobs expire on their own)."""
    view = await _view(request, model_id)
    await _evaluation(request, view, evaluation_id)
    await (await get_context(request)).store.named_evaluations.delete(view.keys, evaluation_id)
    return Response(status_code=204)


async def apply_from_evaluation(request: Request, model_id: str) -> Response:
    """Apply from evaluation: a policy of a succeeded evaluation put in force through the
    challenger-promote step (:mod:`app.api.personalizer_apply`)."""
    view = await _view(request, model_id)
    body = cast(personalizer_apply.ApplyBody,
                parse(personalizer_apply.ApplyBody, await _json(request)))
    await personalizer_apply.apply(await get_context(request), view, body)
    return Response(status_code=204)


async def no_such_call(request: Request, model_id: str, rest: str) -> Response:
    """A path that names no Personalizer call (404 naming it)."""
    await _view(request, model_id)
    raise unknown_call(rest)


def _personalizer_errors(handler: Any) -> Any:
    """``handler`` answering every :class:`ApiError` in Personalizer's shape."""
    @functools.wraps(handler)
    async def wrapped(request: Request, **params: Any) -> Response:
        try:
            response: Response = await handler(request, **params)
        except ApiError as exc:
            return error_response(exc)
        return response

    return wrapped


for _prefix in PREFIXES:
    router.add_api_route(f"{_prefix}/rank", _personalizer_errors(rank_single_slot),
                         methods=["POST"], status_code=201)
    router.add_api_route(f"{_prefix}/events/{{event_id}}/reward",
                         _personalizer_errors(reward_single_slot_event), methods=["POST"],
                         status_code=204)
    router.add_api_route(f"{_prefix}/events/{{event_id}}/activate",
                         _personalizer_errors(activate_event), methods=["POST"],
                         status_code=204)
router.add_api_route(f"{PREFIXES[0]}/multislot/rank", _personalizer_errors(rank_multi_slot),
                     methods=["POST"], status_code=201)
router.add_api_route(f"{PREFIXES[0]}/multislot/events/{{event_id}}/reward",
                     _personalizer_errors(reward_multi_slot_event), methods=["POST"],
                     status_code=204)
router.add_api_route(f"{PREFIXES[0]}/multislot/events/{{event_id}}/activate",
                     _personalizer_errors(activate_event), methods=["POST"], status_code=204)
router.add_api_route(f"{PREFIXES[0]}/configurations/service",
                     _personalizer_errors(get_service_configuration), methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/configurations/service",
                     _personalizer_errors(update_service_configuration), methods=["PUT"])
router.add_api_route(f"{PREFIXES[0]}/configurations/policy", _personalizer_errors(get_policy),
                     methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/configurations/policy", _personalizer_errors(update_policy),
                     methods=["PUT"])
router.add_api_route(f"{PREFIXES[0]}/configurations/policy", _personalizer_errors(reset_policy),
                     methods=["DELETE"])
router.add_api_route(f"{PREFIXES[0]}/model/properties",
                     _personalizer_errors(get_model_properties), methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/model", _personalizer_errors(export_model),
                     methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/model", _personalizer_errors(import_model),
                     methods=["PUT"], status_code=204)
router.add_api_route(f"{PREFIXES[0]}/model", _personalizer_errors(reset_model),
                     methods=["DELETE"], status_code=204)
router.add_api_route(f"{PREFIXES[0]}/logs/properties",
                     _personalizer_errors(get_log_properties), methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/logs", _personalizer_errors(delete_logs),
                     methods=["DELETE"], status_code=204)
_IMPORTANCE = f"{PREFIXES[0]}/featureImportances/{{feature_importance_id}}"
router.add_api_route(_IMPORTANCE, _personalizer_errors(create_feature_importance),
                     methods=["PUT"])
router.add_api_route(_IMPORTANCE, _personalizer_errors(get_feature_importance), methods=["GET"])
router.add_api_route(_IMPORTANCE, _personalizer_errors(delete_feature_importance),
                     methods=["DELETE"], status_code=204)
router.add_api_route(f"{PREFIXES[0]}/featureImportances",
                     _personalizer_errors(list_feature_importances), methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/evaluations/{{evaluation_id}}",
                     _personalizer_errors(create_evaluation), methods=["PUT"])
router.add_api_route(f"{PREFIXES[1]}/evaluations", _personalizer_errors(create_evaluation_v1),
                     methods=["POST"], status_code=201)
for _prefix, _get, _list in zip(PREFIXES, (get_evaluation, get_evaluation_v1),
                                (list_evaluations, list_evaluations_v1), strict=True):
    _EVALUATION = f"{_prefix}/evaluations/{{evaluation_id}}"
    router.add_api_route(_EVALUATION, _personalizer_errors(_get), methods=["GET"])
    router.add_api_route(_EVALUATION, _personalizer_errors(delete_evaluation),
                         methods=["DELETE"], status_code=204)
    router.add_api_route(f"{_prefix}/evaluations", _personalizer_errors(_list),
                         methods=["GET"])
router.add_api_route(f"{PREFIXES[0]}/configurations/applyFromEvaluation",
                     _personalizer_errors(apply_from_evaluation), methods=["POST"],
                     status_code=204)
router.add_api_route("/{model_id}/personalizer/{rest:path}",
                     _personalizer_errors(no_such_call),
                     methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
