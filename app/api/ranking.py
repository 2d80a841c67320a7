"""The ``rank`` task's request path: rank candidates (its feedback: :mod:`app.tasks.rank`).

A decision logs, besides the learner's context (the shown candidates'
features per slot, their scores and placement probabilities), the number
of candidates offered (``n_candidates``, what an evaluation of a uniform
ranking of them needs) and the shown ids as 64-bit hashes per slot
(``ids``; the model's id table maps them back to the ids sent, for the
log's export), so that a later feedback naming ids can be mapped to slots:
the feedback route reads the logged context
(:meth:`~app.store.events.EventStore.read_contexts`), turns the clicked or
rewarded ids into one value per slot (:func:`app.tasks.rank.join_shown`) and then joins
exactly once like any other task (the Lua step that takes the context).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from app.api.apprentice import in_apprentice_mode, ranking_baseline
from app.api.context import ApiContext
from app.api.deps import cached_model, request_model, request_tenant
from app.api.errors import ApiError, from_param_error, unknown_model
from app.api.features import check_norms, feature_bound, to_vector
from app.api.schemas.rank import RankBatchRequest, RankRequest
from app.learners.base import CandidateRanker, Decision, ParamError
from app.learners.registry import learner_class
from app.store.events import DecisionGuard, new_event_ids
from app.store.keys import ModelKeys
from app.store.models import ModelView
from app.tasks.rank import item_hashes


def model_slots(config: Mapping[str, Any]) -> int:
    """The slots a rank model fills at most."""
    return int(config["params"]["slots"])


def action_features(config: Mapping[str, Any]) -> int:
    """The features of each candidate a rank model takes."""
    return int(config["params"]["n_action_features"] or config["n_features"])


@dataclass(frozen=True, slots=True)
class RankInput:
    """One rank request as it is decided: the context vector and the candidate matrix
    (shapes and norms checked), the candidates' ids and the request's options."""

    x: np.ndarray
    actions: np.ndarray
    ids: list[str]
    slots: int | None
    explore: bool
    defer: bool
    baseline: list[str] | None = None


def _action_matrix(request: RankRequest, config: Mapping[str, Any], prefix: str) -> np.ndarray:
    """The ``(n, n_action_features)`` candidate features (422 naming ``actions[i].features``)."""
    da = action_features(config)
    rows = [a.features for a in request.actions]
    if all(isinstance(f, list) and len(f) == da for f in rows):
        A = np.asarray(rows, dtype=np.float64).reshape(len(rows), da)
    else:
        A = np.stack([to_vector(f, da, f"{prefix}actions[{i}].features")
                      for i, f in enumerate(rows)])
    check_norms(A, feature_bound(config), f"{prefix}actions", f"{prefix}actions[{{}}].features")
    return A


def check_options(ids: Sequence[str], slots: int | None, explore: bool, defer: bool,
                  config: Mapping[str, Any], prefix: str) -> None:
    """422 for a duplicate action id (naming the second), more slots than the model's, or
    ``defer`` without ``explore``."""
    if len(set(ids)) < len(ids):
        seen: set[str] = set()
        for i, action_id in enumerate(ids):
            if action_id in seen:
                raise ApiError(422, "invalid_actions", f"action id {action_id!r} appears twice",
                               f"{prefix}actions[{i}].id")
            seen.add(action_id)
    if slots is not None and slots > model_slots(config):
        raise ApiError(422, "invalid_param", f"slots must be at most the model's "
                       f"{model_slots(config)}, got {slots}", f"{prefix}slots")
    if defer and not explore:
        raise ApiError(422, "invalid_param", "defer needs explore: true (a ranking made with "
                       "explore: false is not logged)", f"{prefix}defer")


def rank_input(request: RankRequest, config: Mapping[str, Any], prefix: str) -> RankInput:
    """A validated request's :class:`RankInput` (422 naming the field for any bad input)."""
    ids = [a.id for a in request.actions]
    check_options(ids, request.slots, request.explore, request.defer, config, prefix)
    x = to_vector(request.features, config["n_features"], f"{prefix}features")
    check_norms(x, feature_bound(config), f"{prefix}features")
    return RankInput(x, _action_matrix(request, config, prefix), ids, request.slots,
                     request.explore, request.defer, request.baseline)


def decide(learner: CandidateRanker, request: RankInput, config: Mapping[str, Any],
           prefix: str) -> tuple[Decision, bool | None]:
    """The learner's ranking of one request (422 naming the field for any bad input); in
    apprentice mode the caller's ``baseline`` ranking served instead, with whether the
    learner's greedy slot 0 agreed with it (else None)."""
    try:
        if not in_apprentice_mode(config):
            return learner.decide(request.x, request.explore, actions=request.actions,
                                  slots=request.slots), None
        shown = min(request.slots or model_slots(config), len(request.ids))
        rows = ranking_baseline(request.baseline, request.ids, shown, prefix)
        decision = learner.follow_ranking(request.x, rows, actions=request.actions,
                                          slots=request.slots)
    except ParamError as exc:
        raise from_param_error(exc, prefix) from None
    return decision, decision.output["greedy"][0] == rows[0]


def _logged(decision: Decision, request: RankInput, slots: int,
            candidates: bool) -> dict[str, np.ndarray]:
    """The learner's context plus the shown ids' hashes per slot (0 past the shown slots)
    and the number of candidates (what a uniform ranking of them is evaluated by); with
    ``candidates`` (the model has challengers: they decide among them) every candidate's
    features too."""
    logged = np.zeros(slots, dtype=np.int64)
    shown = [request.ids[r["index"]] for r in decision.output["ranking"]]
    logged[:len(shown)] = item_hashes(shown)
    context = {**decision.context, "ids": logged,
               "n_candidates": np.array(len(request.ids), dtype=np.int64)}
    if candidates:
        context["candidates"] = request.actions
    return context


def _shown_ids(decided: Sequence[tuple[Decision, RankInput]],
               contexts: Sequence[Mapping[str, np.ndarray]]) -> dict[int, str]:
    """The shown candidates' ids by the hash their contexts log (for the model's id table)."""
    return {int(h): request.ids[r["index"]]
            for (decision, request), context in zip(decided, contexts, strict=True)
            for h, r in zip(context["ids"], decision.output["ranking"], strict=False)}


def _response(decision: Decision, ids: Sequence[str], event_id: str | None,
              version: int) -> dict[str, Any]:
    out = decision.output
    doc: dict[str, Any] = {
        "model_version": version,
        "ranking": [{"id": ids[r["index"]], "slot": r["slot"],
                     "probability": r["probability"], "expected_reward": r["expected_reward"]}
                    for r in out["ranking"]],
        "calibration_unreliable": bool(out.get("calibration_unreliable", False))}
    if event_id is not None:
        doc["event_id"] = event_id
    return doc


async def rank(ctx: ApiContext, view: ModelView,
               body: RankRequest | RankBatchRequest) -> dict[str, Any]:
    """Rank one request or a batch; log each explored ranking for its feedback."""
    config = view.config
    if not learner_class(config["task"], config["algorithm"]).ranks_candidates:
        raise ApiError(422, "wrong_task", f"model {config['model_id']!r} is a "
                       f"{config['task']!r} model; rank serves models of task 'rank' "
                       "(use predict)", "model_id")
    found = await ctx.cache.get(view)
    if found is None:
        raise unknown_model(config["model_id"])
    learner, version = found
    ranker = cast(CandidateRanker, learner)
    batch = isinstance(body, RankBatchRequest)
    requests = body.requests if isinstance(body, RankBatchRequest) else [body]
    inputs: list[RankInput] = []
    decided: list[tuple[Decision, bool | None]] = []
    for i, r in enumerate(requests):
        prefix = f"requests[{i}]." if batch else ""
        inputs.append(rank_input(r, config, prefix))
        decided.append(decide(ranker, inputs[-1], config, prefix))
    doc = await log_and_answer(ctx, view.tenant, config, version, inputs, decided, batch,
                               candidates=view.challenged)
    assert doc is not None  # unguarded: always logged
    ctx.metrics.rank_path["regular"].inc()
    return doc


async def log_and_answer(ctx: ApiContext, tenant: str, config: Mapping[str, Any], version: int,
                         inputs: Sequence[RankInput],
                         decided: Sequence[tuple[Decision, bool | None]], batch: bool,
                         guard: DecisionGuard | None = None, *,
                         candidates: bool = False) -> dict[str, Any] | None:
    """Log each explored ranking (with ``guard``: only if the key and model are still those
    cached; None, nothing written, if not; with ``candidates``, every candidate's features
    too), count the decisions and build the answer."""
    decisions = [d for d, _ in decided]
    explored = [i for i, r in enumerate(inputs) if r.explore]
    event_ids: list[str | None] = [None] * len(inputs)
    for i, eid in zip(explored, new_event_ids(len(explored)), strict=True):
        event_ids[i] = eid
    slots = model_slots(config)
    mk = ModelKeys(tenant, config["model_id"])
    apprentice = in_apprentice_mode(config)
    agreed = [bool(a) for _, a in decided]
    # one log step per defer value (two only when a batch mixes them); the first counts all
    for k, defer in enumerate(sorted({inputs[i].defer for i in explored}) or [False]):
        rows = [i for i in explored if inputs[i].defer == defer]
        contexts = [_logged(decisions[i], inputs[i], slots, candidates) for i in rows]
        logged = await ctx.store.events.record_decisions(
            mk, [(event_ids[i], c) for i, c in zip(rows, contexts,  # type: ignore[misc]
                                                   strict=True)],
            config["feedback"]["wait_seconds"], ctx.settings.context_grace_seconds,
            predictions=0 if k else len(inputs), guard=guard, defer=defer,
            apprentice=[agreed[i] for i in rows] if apprentice else None,
            agreement=((0, 0) if k else (len(agreed), sum(agreed))) if apprentice else None,
            item_ids=_shown_ids([(decisions[i], inputs[i]) for i in rows], contexts))
        if logged is None:
            return None
    ctx.metrics.count_decisions(tenant, config["model_id"], len(inputs), version)
    out = [_response(d, r.ids, eid, version)
           for d, r, eid in zip(decisions, inputs, event_ids, strict=True)]
    return {"results": out} if batch else out[0]


@dataclass(frozen=True, slots=True)
class PlainRanks:
    """Dense rank requests as the fast path parses them, types checked as the request schema
    checks them but not yet against the model: every context a row of ``X``, every candidate
    a row of ``A`` (the requests' in order), each request's :class:`RankInput` views of them."""

    X: np.ndarray
    A: np.ndarray
    requests: list[RankInput]
    batch: bool


def _plain_checked(body: PlainRanks, config: Mapping[str, Any]) -> bool:
    """Whether the regular path would take every request of ``body`` (else it answers the
    422 naming the field): widths, options, and the norms of all rows checked at once."""
    if body.X.shape[1] != config["n_features"] or body.A.shape[1] != action_features(config):
        return False
    try:
        for r in body.requests:
            check_options(r.ids, r.slots, r.explore, r.defer, config, "")
        bound = feature_bound(config)
        check_norms(body.X, bound, "features", "features")
        check_norms(body.A, bound, "actions", "actions")
    except ApiError:
        return False
    return True


async def rank_cached(ctx: ApiContext, token: str, model_id: str,
                      body: PlainRanks) -> dict[str, Any] | None:
    """:func:`rank` of plain dense requests in one round trip to Redis, with the cached key
    record and learner (as :func:`~app.api.decisions.predict_cached`); None, having written
    nothing, whenever the regular path must answer: nothing cached or a stale cache, any
    input it would refuse (so that errors are exactly its), a model in apprentice mode, or
    a batch mixing ``defer`` values (logged in two steps, which one guard cannot cover)."""
    found = cached_model(ctx, token, model_id)
    if found is None:
        return None
    key, entry = found
    config = entry.config
    if (not learner_class(config["task"], config["algorithm"]).ranks_candidates
            or in_apprentice_mode(config)
            or len({r.defer for r in body.requests if r.explore}) > 1
            or not _plain_checked(body, config)):
        return None
    inputs = body.requests
    request_tenant.set(key.tenant)
    request_model.set(model_id)
    ranker = cast(CandidateRanker, entry.learner)
    try:
        decided = [decide(ranker, r, config, "") for r in inputs]
    except ApiError:  # the learner refused an input (nothing logged): the regular path says so
        return None
    doc = await log_and_answer(ctx, key.tenant, config, entry.version, inputs, decided,
                               body.batch, DecisionGuard(key, entry.stamp),
                               candidates=entry.challenged)
    if doc is not None:
        ctx.metrics.rank_path["one_round_trip"].inc()
    return doc
