"""Challengers of a model: add (validated like a new model), list with their estimated
value against the champion, remove, promote.

A challenger is another configuration (algorithm, params) of the model's
task.  The trainer (:mod:`workers.challengers`) makes it follow the model's
joined events without serving; this module validates, reads and promotes.
Which models can have challengers is asked of the learner classes: their
feedback must be a click (an estimate compares a challenger's draw for a
logged input with the logged play), or they rank candidates (``ranks_candidates``:
a challenger's first placement among the candidates a decision logs is
compared with the logged slot 0); or of the task, which may say how its
challengers are scored (``continuous``: the challenger's smoothed density of the
logged action).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, cast

import numpy as np
from pydantic import ValidationError

from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model, validation_error
from app.api.modelops import SIZE_PARAMS, validated_config
from app.api.ranking import action_features
from app.api.schemas.challengers import (
    ChallengerCreateRequest,
    ChallengersResponse,
    ChallengerView,
    ChampionValue,
    PromoteRequest,
    PromoteResponse,
    ValueInterval,
)
from app.api.schemas.models import ModelCreateRequest
from app.api.tenantlimits import limit_reached
from app.evaluation.running import LEVEL, Interval, Rates, shown_value
from app.learners.base import CandidateRanker, ParamError
from app.learners.build import build_learner
from app.learners.config import ModelConfig, takes_clicks
from app.learners.offpolicy import PLAY_FIELDS
from app.learners.registry import default_params, learner_class
from app.store.challengers import (
    AddRefused,
    PromoteRefused,
    StoredChallenger,
    challenger_config,
)
from app.store.keys import ModelKeys
from app.store.util import utc_now
from app.store.values import read_value_rates
from app.tasks import get_task

#: Longest a promotion waits for the challenger to save the batch the trainer just published.
CATCH_UP_SECONDS = 2.0
CATCH_UP_POLL_SECONDS = 0.02
#: Params a challenger always has as the model has them: what a decision is (a continuous
#: model's ``action_range``, which the logged plays lie in).
SHARED_PARAMS = ("action_range",)
#: Fields of a model config a challenger's validation carries over from the model.
_CARRIED = ("model_id", "task", "n_features", "n_classes", "feedback", "seed", "label_budget",
            "max_feature_norm")


def follows(config: ModelConfig) -> bool:
    """Whether a model or challenger of ``config`` can follow events as a challenger: its
    learner learns from clicks, or ranks candidates (and learns from per-slot clicks), or
    its task says how challengers are scored (:attr:`~app.tasks.base.Task.challengers`)."""
    cls = config.learner_class
    return (takes_clicks(cls) or cls.ranks_candidates
            or get_task(config.task).challengers is not None)


def _plays(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The shapes of the fields a learner of ``config`` logs that another learns from (one
    greedy decision): the play fields, or every field of a slate (it learns slates as
    logged)."""
    learner = build_learner(config)
    x = np.zeros(config.n_features)
    if not learner.ranks_candidates:
        context = learner.decide(x, explore=False).context
        return {k: np.shape(context[k]) for k in PLAY_FIELDS if k in context}
    one = np.zeros((1, action_features(config)))
    context = cast(CandidateRanker, learner).decide(x, False, actions=one).context
    return {k: np.shape(v) for k, v in context.items()}


def _shape(config: ModelConfig, body: ChallengerCreateRequest) -> dict[str, Any]:
    """The shape params of the model ``config`` (its :data:`SIZE_PARAMS`, and the
    :data:`SHARED_PARAMS`) that a learner of the challenger's algorithm takes: a challenger
    inherits the sizes unless it gives its own, and always the shared ones (422 naming the
    param when it gives another value)."""
    try:
        taken = default_params(learner_class(config.task, body.algorithm))
    except ParamError:
        return {}  # the model's validation names the algorithm
    for name in SHARED_PARAMS:
        if name in body.params and name in config.params and \
                _as_list(body.params[name]) != _as_list(config.params[name]):
            raise ApiError(422, "invalid_param", f"a challenger plays in the model's {name} "
                           f"{config.params[name]!r}", f"params.{name}")
    inherited = [name for name in SIZE_PARAMS if name not in body.params]
    return {name: config.params[name] for name in (*inherited, *SHARED_PARAMS)
            if name in taken and name in config.params}


def _as_list(value: Any) -> Any:
    """``value`` with its numbers as floats (a range given as ints is the same range)."""
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        return value


def validated_challenger(config: ModelConfig, body: ChallengerCreateRequest
                         ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The definition to store and the initial state of a challenger of the model ``config``
    (422 naming the field, as when a model is created)."""
    if not follows(config):
        raise ApiError(409, "challengers_unsupported", f"models of task {config.task!r} "
                       f"with {config.algorithm!r} cannot have challengers (they need "
                       "click feedback)")
    document = config.as_dict()  # the stored fields, as a create request takes them
    fields = {k: document[k] for k in _CARRIED if document.get(k) is not None}
    try:
        request = ModelCreateRequest.model_validate(
            {**fields, "algorithm": body.algorithm,
             "params": {**body.params, **_shape(config, body)}})
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    candidate = validated_config(request)
    if not follows(candidate):
        raise ApiError(422, "invalid_param", f"{body.algorithm!r} does not learn from clicks",
                       "algorithm")
    definition = {"name": body.name, "algorithm": candidate.algorithm,
                  "params": candidate.params, "uid": secrets.token_hex(8),
                  "created_at": utc_now()}
    learner_config = challenger_config(config, definition)
    own, champion = _plays(learner_config), _plays(config)
    for name, shape in own.items():
        if champion.get(name) != shape:
            raise ApiError(422, "invalid_param", f"{body.algorithm!r} with these params logs "
                           f"{name!r} as {shape}, the model's plays log "
                           f"{champion.get(name)!r}: it cannot learn from them", "params")
    return definition, build_learner(learner_config).get_state()


async def add_challenger(ctx: ApiContext, mk: ModelKeys, config: ModelConfig,
                         body: ChallengerCreateRequest) -> ChallengersResponse:
    definition, state = validated_challenger(config, body)
    try:
        await ctx.store.challengers.add(mk, definition, state,
                                        ctx.settings.max_challengers_per_model)
    except AddRefused as exc:
        if exc.reason == "exists":
            raise ApiError(409, "challenger_exists", f"challenger {body.name!r} exists",
                           "name") from None
        if exc.reason == "full":
            raise limit_reached(ctx, mk.tenant, "max_challengers_per_model",
                                f"a model has at most {ctx.settings.max_challengers_per_model} "
                                "challengers; delete one first", "name",
                                code="too_many_challengers") from None
        raise unknown_model(mk.model) from None
    cached = ctx.cache.peek(mk.tenant, mk.model)
    if cached is not None:  # this process's rank decisions log their candidates from now on
        cached.challenged = True
    return await list_challengers(ctx, mk, config)


def _interval(value: Interval) -> ValueInterval:
    return ValueInterval(**value.to_dict())


def _view(stored: StoredChallenger, rates: Rates) -> ChallengerView:
    stats = stored.stats or {}
    value = shown_value(stats, rates)
    d = stored.definition
    return ChallengerView(name=d["name"], algorithm=d["algorithm"], params=d["params"],
                          created_at=d["created_at"], status=stats.get("status", "waiting"),
                          error=stats.get("error"), events=value.events,
                          value=_interval(value.snips), ips=_interval(value.ips),
                          vs_champion=_interval(value.vs_champion))


async def list_challengers(ctx: ApiContext, mk: ModelKeys, config: ModelConfig
                           ) -> ChallengersResponse:
    stored, champion_stats = await ctx.store.challengers.read(mk)
    rates, reason = await read_value_rates(ctx.store, mk, get_task(config.task).has_clicks,
                                           config)
    champion = shown_value(champion_stats, rates)
    return ChallengersResponse(
        champion=ChampionValue(algorithm=config.algorithm, params=config.params,
                               events=champion.events, value=_interval(champion.champion)),
        challengers=[_view(s, rates) for s in stored],
        max_challengers=ctx.settings.max_challengers_per_model,
        level=LEVEL, calibration_unreliable=reason is not None, reason=reason)


def unknown_challenger(name: str, field: str | None = None) -> ApiError:
    return ApiError(404, "unknown_challenger", f"no challenger {name!r}", field)


async def remove_challenger(ctx: ApiContext, mk: ModelKeys, name: str) -> None:
    if not await ctx.store.challengers.remove(mk, name):
        raise unknown_challenger(name)
    ctx.metrics.forget_challenger(mk.tenant, mk.model, name)


async def promote(ctx: ApiContext, mk: ModelKeys, body: PromoteRequest) -> PromoteResponse:
    """Make the challenger the champion, marked in the decision log, in one Lua step."""
    stored, _ = await ctx.store.challengers.read(mk)
    target = next((s for s in stored if s.name == body.challenger), None)
    if target is None:
        raise unknown_challenger(body.challenger, "challenger")
    raw_config = await ctx.store.models.raw_config(mk)
    if raw_config is None:
        raise unknown_model(mk.model)
    config = ModelConfig.from_json(raw_config)
    new_config = challenger_config(config, target.definition)
    previous = None if body.previous_as is None else {
        "name": body.previous_as, "algorithm": config.algorithm, "params": config.params,
        "uid": secrets.token_hex(8), "created_at": utc_now()}
    try:
        version = await _promote_caught_up(ctx, mk, target, raw_config, new_config, previous)
    except PromoteRefused as exc:
        if exc.reason == "name_taken":
            raise ApiError(409, "challenger_exists", f"challenger {body.previous_as!r} exists: "
                           "choose another previous_as (or null)", "previous_as") from None
        if exc.reason == "gone":
            raise unknown_model(mk.model) from None
        if exc.reason == "failed":
            raise await _failed(ctx, mk, body.challenger) from None
        raise ApiError(409, "promote_conflict", "the model or the challenger changed while "
                       "promoting; try again") from None
    ctx.cache.forget(mk.tenant, mk.model)
    ctx.metrics.forget_challenger(mk.tenant, mk.model, body.challenger)
    return PromoteResponse(version=version, algorithm=new_config.algorithm,
                           params=new_config.params, previous_as=body.previous_as)


async def _failed(ctx: ApiContext, mk: ModelKeys, name: str) -> ApiError:
    """409 ``challenger_failed`` naming ``challenger``, with its error as stored now."""
    stored, _ = await ctx.store.challengers.read(mk)
    stats = next((s.stats for s in stored if s.name == name), None) or {}
    return ApiError(409, "challenger_failed", f"challenger {name!r} failed "
                    f"({stats.get('error') or 'unknown error'}): it cannot be promoted; "
                    "remove it or add it again", "challenger")


async def _promote_caught_up(ctx: ApiContext, mk: ModelKeys, target: StoredChallenger,
                             raw_config: bytes, config: ModelConfig,
                             previous: dict[str, Any] | None) -> int:
    """Promote once ``target`` saved the model's last published batch (the trainer publishes
    a batch, then saves what the challengers learned of it): up to
    :data:`CATCH_UP_SECONDS`, then as it is (a challenger that missed a batch lacks it)."""
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while True:
        waiting = time.monotonic() < deadline
        try:
            return await ctx.store.challengers.promote(mk, target, raw_config, config, previous,
                                                       caught_up=waiting)
        except PromoteRefused as exc:
            if exc.reason != "behind":
                raise
        await asyncio.sleep(CATCH_UP_POLL_SECONDS)
