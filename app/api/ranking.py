"""The ``rank`` task's request path: rank candidates, and feedback that names shown ids.

A decision logs, besides the learner's context (the shown candidates'
features per slot, their scores and placement probabilities), the shown
ids as 64-bit hashes per slot (``ids``), so that a later feedback naming
ids can be mapped to slots: the feedback route reads the logged context
(:meth:`~app.store.events.EventStore.read_contexts`), turns the clicked or
rewarded ids into one value per slot (:func:`join_shown`) and then joins
exactly once like any other task (the Lua step that takes the context).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from app.api.apprentice import in_apprentice_mode, ranking_baseline
from app.api.context import ApiContext
from app.api.errors import ApiError, from_param_error, unknown_model
from app.api.features import check_norms, feature_bound, to_vector
from app.api.schemas.rank import RankBatchRequest, RankFeedback, RankRequest
from app.learners.base import CandidateRanker, Decision, Learner, ParamError
from app.learners.registry import learner_class
from app.store.events import new_event_ids
from app.store.keys import ModelKeys
from app.store.models import ModelView


def item_hashes(ids: Sequence[str]) -> np.ndarray:
    """64-bit hashes of action ids (BLAKE2b; stable across processes), as logged per slot.

    >>> item_hashes(["item-14"]) == item_hashes(["item-14"])
    array([ True])
    """
    return np.array([int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(),
                                    "little", signed=True) for i in ids], dtype=np.int64)


def model_slots(config: Mapping[str, Any]) -> int:
    """The slots a rank model fills at most."""
    return int(config["params"]["slots"])


def action_features(config: Mapping[str, Any]) -> int:
    """The features of each candidate a rank model takes."""
    return int(config["params"]["n_action_features"] or config["n_features"])


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


def _check_request(request: RankRequest, config: Mapping[str, Any], prefix: str) -> None:
    """422 for a duplicate action id (naming the second) or more slots than the model's."""
    seen: set[str] = set()
    for i, action in enumerate(request.actions):
        if action.id in seen:
            raise ApiError(422, "invalid_actions", f"action id {action.id!r} appears twice",
                           f"{prefix}actions[{i}].id")
        seen.add(action.id)
    if request.slots is not None and request.slots > model_slots(config):
        raise ApiError(422, "invalid_param", f"slots must be at most the model's "
                       f"{model_slots(config)}, got {request.slots}", f"{prefix}slots")


def _decide(learner: CandidateRanker, request: RankRequest, config: Mapping[str, Any],
            prefix: str) -> tuple[Decision, bool | None, np.ndarray]:
    """The learner's ranking of one request (422 naming the field for any bad input); in
    apprentice mode the caller's ``baseline`` ranking served instead, with whether the
    learner's greedy slot 0 agreed with it (else None); and the candidates' features."""
    _check_request(request, config, prefix)
    if request.defer and not request.explore:
        raise ApiError(422, "invalid_param", "defer needs explore: true (a ranking made with "
                       "explore: false is not logged)", f"{prefix}defer")
    x = to_vector(request.features, config["n_features"], f"{prefix}features")
    check_norms(x, feature_bound(config), f"{prefix}features")
    A = _action_matrix(request, config, prefix)
    try:
        if not in_apprentice_mode(config):
            return learner.decide(x, request.explore, actions=A, slots=request.slots), None, A
        shown = min(request.slots or model_slots(config), len(request.actions))
        rows = ranking_baseline(request, shown, prefix)
        decision = learner.follow_ranking(x, rows, actions=A, slots=request.slots)
    except ParamError as exc:
        raise from_param_error(exc, prefix) from None
    return decision, decision.output["greedy"][0] == rows[0], A


def _logged(decision: Decision, request: RankRequest, slots: int,
            candidates: np.ndarray | None) -> dict[str, np.ndarray]:
    """The learner's context plus the shown ids' hashes per slot (0 past the shown slots);
    with ``candidates`` (the model has challengers: they decide among them) every
    candidate's features too."""
    ids = np.zeros(slots, dtype=np.int64)
    shown = [request.actions[r["index"]].id for r in decision.output["ranking"]]
    ids[:len(shown)] = item_hashes(shown)
    context = {**decision.context, "ids": ids}
    if candidates is not None:
        context["candidates"] = candidates
    return context


def _response(decision: Decision, request: RankRequest, event_id: str | None,
              version: int) -> dict[str, Any]:
    out = decision.output
    doc: dict[str, Any] = {
        "model_version": version,
        "ranking": [{"id": request.actions[r["index"]].id, "slot": r["slot"],
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
    decided = [_decide(ranker, r, config, f"requests[{i}]." if batch else "")
               for i, r in enumerate(requests)]
    decisions = [d for d, _, _ in decided]
    explored = [i for i, r in enumerate(requests) if r.explore]
    event_ids: list[str | None] = [None] * len(requests)
    for i, eid in zip(explored, new_event_ids(len(explored)), strict=True):
        event_ids[i] = eid
    slots = model_slots(config)
    mk = ModelKeys(view.tenant, config["model_id"])
    apprentice = in_apprentice_mode(config)
    agreed = [bool(a) for _, a, _ in decided]
    # one log step per defer value (two only when a batch mixes them); the first counts all
    for k, defer in enumerate(sorted({requests[i].defer for i in explored}) or [False]):
        rows = [i for i in explored if requests[i].defer == defer]
        await ctx.store.events.record_decisions(
            mk, [(event_ids[i],  # type: ignore[misc]
                  _logged(decisions[i], requests[i], slots,
                          decided[i][2] if view.challenged else None)) for i in rows],
            config["feedback"]["wait_seconds"], ctx.settings.context_grace_seconds,
            predictions=0 if k else len(requests), defer=defer,
            apprentice=[agreed[i] for i in rows] if apprentice else None,
            agreement=(len(agreed), sum(agreed)) if apprentice and not k else None)
    ctx.metrics.count_decisions(view.tenant, config["model_id"], len(requests), version)
    out = [_response(d, r, eid, version)
           for d, r, eid in zip(decisions, requests, event_ids, strict=True)]
    return {"results": out} if batch else out[0]


# -- feedback --------------------------------------------------------------------------


def feedback_fields(event: RankFeedback, config: Mapping[str, Any],
                    cls: type[Learner]) -> dict[str, np.ndarray]:
    """The named ids' hashes, rewards and JSON paths (mapped to slots by :func:`join_shown`)."""
    if event.clicks is not None:
        seen: dict[str, int] = {}
        for i, item in enumerate(event.clicks):
            if item in seen:
                raise ApiError(422, "invalid_feedback", f"id {item!r} is listed twice",
                               f"clicks[{i}]")
            seen[item] = i
        ids, rewards = list(event.clicks), [1.0] * len(event.clicks)
        paths = [f"clicks[{i}]" for i in range(len(ids))]
    else:
        assert event.rewards is not None
        ids, rewards = list(event.rewards), list(event.rewards.values())
        paths = [f"rewards.{item}" for item in ids]
    return {"item_ids": item_hashes(ids), "rewards": np.array(rewards, dtype=np.float64),
            "paths": np.array(paths, dtype=str)}


def join_shown(fields: Mapping[str, np.ndarray],
               context: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{"clicks": one value per slot}`` from the named ids and the logged shown ids; 422
    naming the id's path when it was not shown with this event."""
    logged = np.asarray(context["ids"])
    shown = int(context["shown"])
    slot_of = {int(h): k for k, h in enumerate(logged[:shown])}
    clicks = np.zeros(logged.shape[0])
    for item, reward, path in zip(fields["item_ids"], fields["rewards"], fields["paths"],
                                  strict=True):
        slot = slot_of.get(int(item))
        if slot is None:
            raise ApiError(422, "invalid_feedback", "this id was not shown with the event",
                           str(path))
        clicks[slot] = reward
    return {"clicks": clicks}
