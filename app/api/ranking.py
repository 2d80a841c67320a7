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
from itertools import chain
from typing import Any, cast

import numpy as np

from app.api.apprentice import in_apprentice_mode, ranking_baseline
from app.api.decisionrequest import (
    Candidates,
    Decided,
    DecisionOptions,
    DecisionRequest,
    Features,
    stored_decision,
)
from app.api.errors import ApiError, from_param_error
from app.features import check_norms, feature_bound, to_vector
from app.learners.base import CandidateRanker, Decision, ParamError
from app.learners.config import ModelConfig
from app.store.codec import stored_forms
from app.tasks.rank import item_hashes


def model_slots(config: ModelConfig) -> int:
    """The slots a rank model fills at most."""
    return int(config.params["slots"])


def action_features(config: ModelConfig) -> int:
    """The features of each candidate a rank model takes."""
    return int(config.params["n_action_features"] or config.n_features)


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
    allowed: np.ndarray | None = None


def _action_matrix(features: Sequence[Features], config: ModelConfig,
                   prefix: str) -> np.ndarray:
    """The ``(n, n_action_features)`` candidate features (422 naming ``actions[i].features``)."""
    da = action_features(config)
    rows = list(features)
    if all(isinstance(f, list) and len(f) == da for f in rows):
        A = np.asarray(rows, dtype=np.float64).reshape(len(rows), da)
    else:
        A = np.stack([to_vector(f, da, f"{prefix}actions[{i}].features")
                      for i, f in enumerate(rows)])
    check_norms(A, feature_bound(config), f"{prefix}actions", f"{prefix}actions[{{}}].features")
    return A


def check_options(ids: Sequence[str], options: DecisionOptions, config: ModelConfig,
                  prefix: str) -> None:
    """422 for a duplicate action id (naming the second), more slots than the model's, or
    ``defer`` without ``explore``."""
    if len(set(ids)) < len(ids):
        seen: set[str] = set()
        for i, action_id in enumerate(ids):
            if action_id in seen:
                raise ApiError(422, "invalid_actions", f"action id {action_id!r} appears twice",
                               f"{prefix}actions[{i}].id")
            seen.add(action_id)
    slots = options.slots
    if slots is not None and slots > model_slots(config):
        raise ApiError(422, "invalid_param", f"slots must be at most the model's "
                       f"{model_slots(config)}, got {slots}", f"{prefix}slots")
    if options.defer and not options.explore:
        raise ApiError(422, "invalid_param", "defer needs explore: true (a ranking made with "
                       "explore: false is not logged)", f"{prefix}defer")


def _baseline(options: DecisionOptions) -> list[str] | None:
    """A rank request's baseline (the schema takes only a list of action ids for it)."""
    return cast("list[str] | None", options.baseline)


def rank_input(features: Features, candidates: Candidates, options: DecisionOptions,
               config: ModelConfig, prefix: str) -> RankInput:
    """One request's :class:`RankInput` (422 naming the field for any bad input): with
    candidates seen per slot, their ``(slots, n, d_a)`` features and the mask of those each
    slot allows."""
    check_options(candidates.ids, options, config, prefix)
    x = to_vector(features, config.n_features, f"{prefix}features")
    check_norms(x, feature_bound(config), f"{prefix}features")
    per_slot = candidates.per_slot
    if per_slot is None:
        actions, allowed = _action_matrix(candidates.features, config, prefix), None
    else:
        actions = np.stack([_action_matrix(f, config, f"{prefix}slots[{k}].")
                            for k, f in enumerate(per_slot.features)])
        allowed = np.array(per_slot.allowed, dtype=bool)
    return RankInput(x, actions, candidates.ids, options.slots, options.explore,
                     options.defer, _baseline(options), allowed)


def _dense_inputs(request: DecisionRequest, config: ModelConfig) -> list[RankInput] | None:
    """Every request's :class:`RankInput` when all contexts and candidates are dense lists of
    the model's widths and every norm is within the model's bound, built and checked at once
    (sets of types and lengths, built in C; one array each), without their options checked;
    else None (:func:`rank_input` then checks them one by one and names the field)."""
    assert request.candidates is not None
    if any(c.per_slot is not None for c in request.candidates):
        return None
    contexts: list[Any] = request.contexts
    rows: list[Any] = list(chain.from_iterable(c.features for c in request.candidates))
    d, da = config.n_features, action_features(config)
    if ({*map(type, contexts)} != {list} or {*map(len, contexts)} != {d}
            or {*map(type, rows)} != {list} or {*map(len, rows)} != {da}):
        return None
    X = np.array(contexts, dtype=np.float64).reshape(len(contexts), d)
    A = np.array(rows, dtype=np.float64).reshape(len(rows), da)
    bound = feature_bound(config)
    try:
        check_norms(X, bound, "features", "features")
        check_norms(A, bound, "actions", "actions")
    except ApiError:
        return None
    out: list[RankInput] = []
    end = 0
    for x, c, o in zip(X, request.candidates, request.options, strict=True):
        out.append(RankInput(x, A[end:end + len(c.ids)], c.ids, o.slots, o.explore, o.defer,
                             _baseline(o)))
        end += len(c.ids)
    return out


def decide(learner: CandidateRanker, request: RankInput, config: ModelConfig,
           prefix: str) -> tuple[Decision, bool | None]:
    """The learner's ranking of one request (422 naming the field for any bad input); in
    apprentice mode the caller's ``baseline`` ranking served instead, with whether the
    learner's greedy slot 0 agreed with it (else None)."""
    try:
        if not in_apprentice_mode(config):
            return learner.decide(request.x, request.explore, actions=request.actions,
                                  slots=request.slots, allowed=request.allowed), None
        shown = min(request.slots or model_slots(config), len(request.ids))
        rows = ranking_baseline(request.baseline, request.ids, shown, prefix)
        decision = learner.follow_ranking(request.x, rows, actions=request.actions,
                                          slots=request.slots, allowed=request.allowed)
    except ParamError as exc:
        raise from_param_error(exc, prefix) from None
    return decision, decision.output["greedy"][0] == rows[0]


def decide_ranks(learner: CandidateRanker, request: DecisionRequest, config: ModelConfig,
                 candidates: bool) -> Decided:
    """Check each request against the model and rank it, in order (the first bad input is the
    422, naming its field); the logged context of each explored ranking (with
    ``candidates``: every candidate's features too, see :func:`_logged`)."""
    assert request.candidates is not None
    dense = _dense_inputs(request, config)
    decisions: list[Decision] = []
    agreed: list[bool] = []
    contexts: list[dict[str, np.ndarray] | None] = []
    shown: list[dict[int, str]] = []
    slots = model_slots(config)
    for i, (x, c, o) in enumerate(zip(request.contexts, request.candidates, request.options,
                                      strict=True)):
        prefix = f"requests[{i}]." if request.batch else ""
        if dense is None:
            one = rank_input(x, c, o, config, prefix)
        else:
            one = dense[i]
            check_options(c.ids, o, config, prefix)
        decision, agrees = decide(learner, one, config, prefix)
        agreed.append(bool(agrees))
        context = stored_forms(_logged(decision, one, slots, candidates)) if o.explore \
            else None
        contexts.append(context)
        shown.append({} if context is None else _shown_ids(decision, one, context))
        decisions.append(stored_decision(decision))
    return Decided(decisions, contexts, agreed if in_apprentice_mode(config) else None, shown)


def _logged(decision: Decision, request: RankInput, slots: int,
            candidates: bool) -> dict[str, np.ndarray]:
    """The learner's context plus the shown ids' hashes per slot (0 past the shown slots)
    and the number of candidates (what a uniform ranking of them is evaluated by); with
    ``candidates`` (the model has challengers: they decide among them) every candidate's
    features too.  Candidates seen per slot count, and log, as slot 0 sees them (those it
    allows, with its features): the first placement is what challengers are scored on."""
    logged = np.zeros(slots, dtype=np.int64)
    shown = [request.ids[r["index"]] for r in decision.output["ranking"]]
    logged[:len(shown)] = item_hashes(shown)
    first = (request.actions if request.allowed is None
             else request.actions[0][request.allowed[0]])
    context = {**decision.context, "ids": logged,
               "n_candidates": np.array(len(first), dtype=np.int64)}
    if candidates:
        context["candidates"] = first
    return context


def _shown_ids(decision: Decision, request: RankInput,
               context: Mapping[str, np.ndarray]) -> dict[int, str]:
    """The shown candidates' ids by the hash their context logs (for the model's id table)."""
    return {int(h): request.ids[r["index"]]
            for h, r in zip(context["ids"], decision.output["ranking"], strict=False)}


def rank_answer(decision: Decision, ids: Sequence[str], event_id: str | None,
                version: int) -> dict[str, Any]:
    """The answer of one ranking (the fields of :class:`~app.tasks.rank.RankResponse`)."""
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
