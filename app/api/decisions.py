"""Predictions (checked against the model and decided; logged and answered by
:mod:`app.api.deciding`) and feedback, shared by the HTTP routes, the WebSocket and the
Kafka consumer.

Feedback makes one round trip to Redis per request (after the one that
authenticates and reads the model view, see :mod:`app.api.deps`): the
exactly-once join of all its events, pipelined.  Feedback never waits for
learning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.api.apprentice import follow_labels, in_apprentice_mode, label_baselines
from app.api.context import ApiContext
from app.api.decisionrequest import Decided, DecisionRequest, stored_decision
from app.api.errors import ApiError, from_param_error
from app.api.openfeedback import add_examples, stays_open, take_open, take_open_many
from app.api.schemas.feedback import FeedbackBatchRequest
from app.features import check_norms, feature_bound, row_spans, to_matrix, to_vector
from app.learners.base import Decision, Learner, ParamError
from app.learners.config import ModelConfig
from app.store.keys import ModelKeys
from app.store.models import ModelView
from app.tasks import Task, get_task

_OUTCOME_ERRORS = {
    "unknown": (404, "unknown_event",
                "no such event: never issued, issued for another model, or expired"),
    "duplicate": (409, "duplicate_feedback", "feedback for this event was already accepted"),
    "not_activated": (409, "not_activated",
                      "this decision was made with defer: true and is not activated yet: POST "
                      ".../events/{event_id}/activate once it was shown, then send the feedback "
                      "(nothing of this one was accepted)"),
}


def _inputs(request: DecisionRequest, config: ModelConfig, rows: range) -> np.ndarray:
    """The ``(len(rows), n_features)`` inputs of the request's contexts ``rows`` (422 naming
    the field when they do not fit or a norm exceeds the model's ``max_feature_norm``)."""
    n_features = config.n_features
    if not request.batch:
        X = to_vector(request.contexts[0], n_features)[None, :]
        check_norms(X, feature_bound(config), "features", "features")
        return X
    X = to_matrix(request.contexts[rows.start:rows.stop], n_features, first=rows.start)
    check_norms(X, feature_bound(config), "instances", "instances[{}]", rows.start)
    return X


def decide_predictions(learner: Learner, request: DecisionRequest, config: ModelConfig,
                       max_cells: int) -> Decided:
    """Check a predict request against the model and decide for each of its inputs (422
    naming the field for any bad input); in apprentice mode the caller's baselines served
    instead (labels, or as the task follows them).

    The inputs are made dense and decided in spans of at most ``max_cells`` float64
    (:func:`~app.features.row_spans`), each decision keeping its context as the log stores
    it (:func:`~app.store.codec.stored_form`): a batch of wide sparse contexts never holds
    more than one span dense.  A request of several spans is checked whole before any is
    decided (nothing is decided for a request with a bad input); the decisions are those of
    one call on the whole batch (a learner decides row by row, its draws in row order).
    """
    if learner.ranks_candidates:
        model_id = config.model_id
        raise ApiError(422, "wrong_task", f"model {model_id!r} is a {config.task!r} model: "
                       f"it ranks candidates, with POST /v1/models/{model_id}/rank "
                       "(predict serves the other tasks)", "model_id")
    n = len(request.contexts)
    spans = row_spans(n, config.n_features, max_cells)
    pending: np.ndarray | None = _inputs(request, config, spans[0])
    for rows in spans[1:]:
        _inputs(request, config, rows)  # checked, then dropped: made again when decided
    options = request.options[0]
    if options.defer and not options.explore:
        raise ApiError(422, "invalid_param", "defer needs explore: true (a decision made "
                       "with explore: false is not logged)", "defer")
    follower = get_task(config.task).follow_baseline
    instances = n if request.batch else None
    baselines: Sequence[Any] | None = None
    if in_apprentice_mode(config):
        baselines = (label_baselines(options.baseline, instances, config.class_count)
                     if follower is None else follower.parse(options.baseline, instances,
                                                             config))
    follow = follow_labels if follower is None else follower.follow
    decisions: list[Decision] = []
    agreed: list[bool] | None = None if baselines is None else []
    for rows in spans:
        X = pending if pending is not None else _inputs(request, config, rows)
        pending = None
        try:
            if baselines is not None and agreed is not None:
                made, agree = follow(learner, X, baselines[rows.start:rows.stop])
                agreed += agree
            else:
                made = learner.decide_many(X, explore=options.explore)
        except ParamError as exc:
            raise from_param_error(exc) from None
        decisions += [stored_decision(d) for d in made]
        del X, made  # the span's matrix: its rows' contexts are kept as stored
    return Decided(decisions, [d.context if options.explore else None for d in decisions],
                   agreed, None)



async def feedback(ctx: ApiContext, view: ModelView,
                   body: Any) -> tuple[int, dict[str, Any]]:
    """Join one event (202, or 404/409/422) or a batch (202 with per-event rejections)."""
    config = view.config
    spec = get_task(config.task)
    cls = config.learner_class
    mk = view.keys
    count = ctx.metrics.feedback
    labels = (view.tenant, config.model_id)
    if not isinstance(body, FeedbackBatchRequest):
        event_id, fields = spec.parse_feedback(body, config, cls)
        if event_id is None:
            await add_examples(ctx, view, [fields])
            count.labels(*labels, "accepted").inc()
            return 202, {"accepted": True}
        more: dict[str, int] = {}
        if stays_open(spec, config):
            status, more = await take_open(ctx, view, spec, event_id, fields)
        else:
            status = await _take_one(ctx, mk, spec, event_id, fields, view.apprenticed)
        if status not in ("ok", "open"):
            http_status, code, message = _OUTCOME_ERRORS[status]
            count.labels(*labels, code).inc()
            raise ApiError(http_status, code, message, "event_id")
        count.labels(*labels, status if status == "open" else "accepted").inc()
        return 202, {"accepted": True, **more}
    rejected: list[dict[str, Any]] = []
    valid: list[tuple[int, str, dict[str, np.ndarray]]] = []
    examples: list[dict[str, np.ndarray]] = []
    for i, raw in enumerate(body.events):
        try:
            eid, fields = spec.parse_feedback(raw, config, cls, prefix=f"events[{i}]")
        except ApiError as exc:
            rejected.append({"index": i, "error": exc.body()["error"]})
            continue
        if eid is None:
            examples.append(fields)
        else:
            valid.append((i, eid, fields))
    ended: list[tuple[int, str]] = []
    if spec.join_context is not None and not stays_open(spec, config):
        valid, ended = await _join_contexts(ctx, view, spec, valid, rejected)
    count.labels(*labels, "invalid").inc(len(rejected))
    opened: list[dict[str, Any]] = []
    statuses = await _take_many(ctx, view, spec, valid, rejected, opened)
    accepted = len(examples)
    outcomes = [*((i, status) for (i, _, _), status in zip(valid, statuses, strict=True)),
                *ended]
    still_open = 0  # accepted and not yet joined: parts awaiting more, or summed rewards
    for i, status in outcomes:
        if status in ("ok", "open"):
            accepted += 1
            still_open += status == "open"
        elif status in _OUTCOME_ERRORS:
            _, code, message = _OUTCOME_ERRORS[status]
            count.labels(*labels, code).inc()
            rejected.append({"index": i, "error": {"code": code, "message": message,
                                                   "field": f"events[{i}].event_id"}})
    if examples:
        await add_examples(ctx, view, examples)
    count.labels(*labels, "accepted").inc(accepted - still_open)
    count.labels(*labels, "open").inc(still_open)
    rejected.sort(key=lambda r: r["index"])
    doc: dict[str, Any] = {"accepted": accepted, "rejected": rejected}
    if opened:
        doc["open"] = opened
    return 202, doc


async def _take_one(ctx: ApiContext, mk: ModelKeys, spec: Task, event_id: str,
                    fields: dict[str, np.ndarray], apprentice: bool) -> str:
    """Join one event exactly once; "ok", "unknown", "duplicate" or "not_activated" (422 from
    the task's :attr:`~app.tasks.base.Task.join_context`, if it has one, with the logged
    context); ``apprentice``: count its reward if it was an apprentice decision
    (:func:`_rewards`)."""
    if spec.join_context is not None:
        found = (await ctx.store.events.read_contexts(mk, [event_id]))[0]
        if isinstance(found, str):
            return found
        fields = spec.join_context(fields, found)
    reward = _rewards(spec, [fields], apprentice)
    return (await ctx.store.events.take_feedback(
        mk, event_id, fields, None if reward is None else reward[0])).status


def _rewards(spec: Task, fields: list[dict[str, np.ndarray]],
             apprentice: bool) -> list[float] | None:
    """The observed reward of each joined feedback of a model that logged apprentice
    decisions (``apprentice``; those that were add it to its apprentice counters, whatever
    the mode now), else None."""
    if not apprentice or spec.reward is None:
        return None
    return [spec.reward(f) for f in fields]


async def _join_contexts(ctx: ApiContext, view: ModelView, spec: Task,
                         valid: list[tuple[int, str, dict[str, np.ndarray]]],
                         rejected: list[dict[str, Any]],
                         ) -> tuple[list[tuple[int, str, dict[str, np.ndarray]]],
                                    list[tuple[int, str]]]:
    """The batch's events with their fields joined with the logged contexts (one read), and
    the events that already ended ("unknown", "duplicate"); 422s go to ``rejected``."""
    assert spec.join_context is not None
    found = await ctx.store.events.read_contexts(view.keys, [eid for _, eid, _ in valid])
    joined: list[tuple[int, str, dict[str, np.ndarray]]] = []
    ended: list[tuple[int, str]] = []
    for (i, eid, fields), context in zip(valid, found, strict=True):
        if isinstance(context, str):
            ended.append((i, context))
            continue
        try:
            joined.append((i, eid, spec.join_context(fields, context)))
        except ApiError as exc:
            error = exc.body()["error"]
            error["field"] = f"events[{i}].{exc.field}" if exc.field else f"events[{i}]"
            rejected.append({"index": i, "error": error})
    return joined, ended


async def _take_many(ctx: ApiContext, view: ModelView, spec: Task,
                     valid: list[tuple[int, str, dict[str, np.ndarray]]],
                     rejected: list[dict[str, Any]], opened: list[dict[str, Any]]) -> list[str]:
    """Join the batch's events; per event "ok", "open", "unknown", "duplicate",
    "not_activated" or "invalid".

    One Lua call for the whole batch; tasks with feedback in parts and models
    that add up their feedback read their open decisions first (joining the
    contexts there, and retrying the events a concurrent part changed, see
    :func:`~app.api.openfeedback.take_open_many`).
    """
    items = [(eid, fields) for _, eid, fields in valid]
    if not items:
        return []
    if not stays_open(spec, view.config):
        rewards = _rewards(spec, [f for _, f in items], view.apprenticed)
        return [o.status for o in
                await ctx.store.events.take_feedback_many(view.keys, items, rewards)]
    statuses = []
    for (i, eid, _), result in zip(valid, await take_open_many(ctx, view, spec, items),
                                   strict=True):
        if isinstance(result, ApiError):
            error = result.body()["error"]
            error["field"] = f"events[{i}].{result.field}" if result.field else f"events[{i}]"
            rejected.append({"index": i, "error": error})
            statuses.append("invalid")
            continue
        status, more = result
        if more:
            opened.append({"index": i, "event_id": eid, **more})
        statuses.append(status)
    return statuses
