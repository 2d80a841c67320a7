"""The decision path of predict and rank: a request's normal form in, its answer out.

Whichever parser read the body (a route's pydantic schema, the WebSocket's,
or the fast path's hand parsers, :mod:`app.api.fastbody`), the request
arrives as a :class:`~app.api.decisionrequest.DecisionRequest` and goes
through one function, :func:`decide_log_answer`: checked against the model
and decided (:func:`~app.api.decisions.decide_predictions` or
:func:`~app.api.ranking.decide_ranks`, as the request carries candidates
or not), each explored decision logged with its deadline, the decisions
counted, the answer built.

Round trips to Redis: :func:`predict` and :func:`rank` follow the one that
authenticates and reads the model view (:mod:`app.api.deps`) with one (log
and count), plus one snapshot fetch when the model's version changed.
:func:`predict_cached` and :func:`rank_cached` need a single round trip in
all: no authenticating read first, the key and model state they decided with
are checked by the Lua step that logs the decisions.
"""

from __future__ import annotations

from typing import Any, cast

from app.api.apprentice import in_apprentice_mode
from app.api.context import ApiContext
from app.api.decisionrequest import DecisionRequest
from app.api.decisions import decide_predictions
from app.api.deps import authorize_model, cached_model, request_model, request_tenant
from app.api.errors import ApiError, unknown_model
from app.api.presets import logs_candidates
from app.api.ranking import decide_ranks, rank_answer
from app.api.tenantlimits import hold_limit_reached
from app.learners.base import CandidateRanker, Learner
from app.learners.config import ModelConfig
from app.store.events import DecisionGuard, HoldLimitReached, new_event_ids
from app.store.keys import ModelKeys
from app.store.models import ModelView
from app.tasks import get_task


async def decide_log_answer(ctx: ApiContext, tenant: str, config: ModelConfig,
                            learner: Learner, version: int, request: DecisionRequest,
                            guard: DecisionGuard | None = None, *,
                            candidates: bool = False) -> dict[str, Any] | None:
    """Check ``request`` against the model and decide (422 naming the field for any bad
    input), log each explored decision (with ``guard``: only if the key and model are still
    those cached; None, nothing written, if not; with ``candidates``, every candidate's
    features of a ranking too, as a model of a preset that logs them always has), count the
    decisions and build the answer."""
    if request.candidates is None:
        made = decide_predictions(learner, request, config, ctx.settings.worker.max_dense_cells)
    else:
        made = decide_ranks(cast(CandidateRanker, learner), request, config,
                            candidates or logs_candidates(config.preset))
    n = len(made.decisions)
    options = request.options if len(request.options) == n else request.options * n
    explored = [i for i, o in enumerate(options) if o.explore]
    event_ids: list[str | None] = [None] * n
    for i, eid in zip(explored, new_event_ids(len(explored)), strict=True):
        event_ids[i] = eid
    mk = ModelKeys(tenant, config.model_id)
    agreed = made.agreed
    # one log step per defer value (two only when a batch mixes them); the first counts all
    for k, defer in enumerate(sorted({options[i].defer for i in explored}) or [False]):
        rows = [i for i in explored if options[i].defer == defer]
        try:
            logged = await ctx.store.events.record_decisions(
                mk, [(cast(str, event_ids[i]), cast(dict, made.contexts[i])) for i in rows],
                config.feedback.wait_seconds, ctx.settings.context_grace_seconds,
                predictions=0 if k else n, guard=guard, defer=defer,
                apprentice=None if agreed is None else [agreed[i] for i in rows],
                agreement=None if agreed is None else (0, 0) if k else (n, sum(agreed)),
                item_ids=None if made.shown is None else {
                    h: item for i in rows for h, item in made.shown[i].items()},
                max_pending=ctx.settings.max_pending_per_model,
                max_context_bytes=ctx.settings.max_context_bytes)
        except HoldLimitReached as exc:
            if guard is not None:  # the regular path refuses it (and counts it once)
                return None
            raise hold_limit_reached(ctx, tenant, exc) from None
        if logged is None:
            return None
    ctx.metrics.count_decisions(tenant, config.model_id, n, version)
    if request.candidates is None:
        spec = get_task(config.task)
        out = [spec.prediction(d.output, eid, version)
               for d, eid in zip(made.decisions, event_ids, strict=True)]
        return {"predictions": out} if request.batch else out[0]
    ranked = [rank_answer(d, c.ids, eid, version)
              for d, c, eid in zip(made.decisions, request.candidates, event_ids, strict=True)]
    return {"results": ranked} if request.batch else ranked[0]


async def predict(ctx: ApiContext, view: ModelView, request: DecisionRequest) -> dict[str, Any]:
    """Decide for one instance or a batch; log each decision unless ``explore`` is false."""
    found = await ctx.cache.get(view)
    if found is None:
        raise unknown_model(view.config.model_id)
    learner, version = found
    doc = await decide_log_answer(ctx, view.tenant, view.config, learner, version, request)
    assert doc is not None  # unguarded: always logged
    ctx.metrics.predict_path["regular"].inc()
    return doc


async def predict_cached(ctx: ApiContext, token: str, model_id: str,
                         request: DecisionRequest) -> dict[str, Any] | None:
    """:func:`predict` in one round trip to Redis, with the cached key record and learner.

    The key's secret is verified in-process against the cached record (a
    constant-time compare, as the regular path does), the decision is made
    with the cached learner, and one guarded Lua step logs it only if Redis
    still holds that key and that model state (config, snapshot version,
    noise rates: :class:`~app.store.events.DecisionGuard`).  Returns None,
    having written nothing, whenever the regular path must answer instead:
    nothing cached yet, a stale cache (a new snapshot, a revoked key, a
    deleted model), a secret that does not verify, an invalid request (so that
    errors are exactly the regular path's), a Redis Cluster, or a rate limit
    (its token bucket is a round trip of its own; a fall back after taking a
    token would take a second one).
    """
    found = cached_model(ctx, token, model_id)
    if found is None:
        return None
    key, entry = found
    request_tenant.set(key.tenant)
    request_model.set(model_id)
    try:
        doc = await decide_log_answer(ctx, key.tenant, entry.config, entry.learner,
                                      entry.version, request, DecisionGuard(key, entry.stamp))
    except ApiError:  # a bad input (nothing logged): the regular path says so
        return None
    if doc is not None:
        ctx.metrics.predict_path["one_round_trip"].inc()
    return doc


async def predict_for_key(ctx: ApiContext, token: str, model_id: str,
                          request: DecisionRequest) -> dict[str, Any]:
    """:func:`predict_cached` when it can answer, else authenticate and :func:`predict`."""
    doc = await predict_cached(ctx, token, model_id, request)
    if doc is None:
        doc = await predict(ctx, await authorize_model(ctx, token, model_id), request)
    return doc


async def rank(ctx: ApiContext, view: ModelView, request: DecisionRequest) -> dict[str, Any]:
    """Rank one request or a batch; log each explored ranking for its feedback."""
    config = view.config
    if not config.learner_class.ranks_candidates:
        raise ApiError(422, "wrong_task", f"model {config.model_id!r} is a "
                       f"{config.task!r} model; rank serves models of task 'rank' "
                       "(use predict)", "model_id")
    found = await ctx.cache.get(view)
    if found is None:
        raise unknown_model(config.model_id)
    learner, version = found
    doc = await decide_log_answer(ctx, view.tenant, config, learner, version, request,
                                  candidates=view.challenged)
    assert doc is not None  # unguarded: always logged
    ctx.metrics.rank_path["regular"].inc()
    return doc


async def rank_cached(ctx: ApiContext, token: str, model_id: str,
                      request: DecisionRequest) -> dict[str, Any] | None:
    """:func:`rank` in one round trip to Redis, with the cached key record and learner (as
    :func:`predict_cached`); None, having written nothing, whenever the regular path must
    answer: nothing cached or a stale cache, any input it would refuse (so that errors are
    exactly its), a model in apprentice mode, or a batch mixing ``defer`` values (logged in
    two steps, which one guard cannot cover)."""
    found = cached_model(ctx, token, model_id)
    if found is None:
        return None
    key, entry = found
    config = entry.config
    if (not config.learner_class.ranks_candidates
            or in_apprentice_mode(config)
            or len({o.defer for o in request.options if o.explore}) > 1):
        return None
    request_tenant.set(key.tenant)
    request_model.set(model_id)
    try:
        doc = await decide_log_answer(ctx, key.tenant, config, entry.learner, entry.version,
                                      request, DecisionGuard(key, entry.stamp),
                                      candidates=entry.challenged)
    except ApiError:  # a bad input (nothing logged): the regular path says so
        return None
    if doc is not None:
        ctx.metrics.rank_path["one_round_trip"].inc()
    return doc
