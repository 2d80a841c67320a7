"""Predict and feedback: the hot path, shared by the HTTP routes and the WebSocket.

Round trips to Redis per request (after the one that authenticates and reads
the model view, see :mod:`app.api.deps`): predict makes one (log the
decision contexts with their deadline, count), plus one snapshot fetch when
the model's version changed; feedback makes one (the exactly-once join of
all its events, pipelined).  Feedback never waits for learning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.api.features import to_matrix, to_vector
from app.api.openfeedback import add_examples, take_open
from app.api.schemas.feedback import FeedbackBatchRequest
from app.api.schemas.predict import PredictRequest
from app.api.tasks import TaskSpec, task_spec
from app.learners.registry import learner_class
from app.store.events import new_event_id
from app.store.models import ModelView

_OUTCOME_ERRORS = {
    "unknown": (404, "unknown_event",
                "no such event: never issued, issued for another model, or expired"),
    "duplicate": (409, "duplicate_feedback", "feedback for this event was already accepted"),
}


async def predict(ctx: ApiContext, view: ModelView, body: PredictRequest) -> dict[str, Any]:
    """Decide for one instance or a batch; log each decision unless ``explore`` is false."""
    config = view.config
    spec = task_spec(config["task"])
    n_features = config["n_features"]
    if body.features is not None:
        X = to_vector(body.features, n_features)[None, :]
    else:
        assert body.instances is not None
        X = to_matrix(body.instances, n_features)
    found = await ctx.cache.get(view)
    if found is None:
        raise unknown_model(config["model_id"])
    learner, version = found
    decisions = learner.decide_many(X, explore=body.explore)
    mk = view.keys
    if body.explore:
        event_ids: list[str | None] = [new_event_id() for _ in decisions]
        await ctx.store.events.record_decisions(
            mk, [(eid, d.context) for eid, d in zip(event_ids, decisions, strict=True)
                 if eid is not None],
            config["feedback"]["wait_seconds"], ctx.settings.context_grace_seconds)
    else:
        event_ids = [None] * len(decisions)
        await ctx.store.events.count_predictions(mk, len(decisions))
    ctx.metrics.predictions.labels(view.tenant, config["model_id"]).inc(len(decisions))
    ctx.metrics.model_version.labels(view.tenant, config["model_id"]).set(version)
    out = [spec.prediction(d.output, eid, version)
           for d, eid in zip(decisions, event_ids, strict=True)]
    return out[0] if body.features is not None else {"predictions": out}


async def feedback(ctx: ApiContext, view: ModelView,
                   body: Any) -> tuple[int, dict[str, Any]]:
    """Join one event (202, or 404/409/422) or a batch (202 with per-event rejections)."""
    config = view.config
    spec = task_spec(config["task"])
    cls = learner_class(config["task"], config["algorithm"])
    mk = view.keys
    count = ctx.metrics.feedback
    labels = (view.tenant, config["model_id"])
    if not isinstance(body, FeedbackBatchRequest):
        event_id, fields = spec.parse_feedback(body, config, cls)
        if event_id is None:
            await add_examples(ctx, view, [fields])
            count.labels(*labels, "accepted").inc()
            return 202, {"accepted": True}
        more: dict[str, int] = {}
        if spec.open_feedback is not None:
            status, more = await take_open(ctx, view, spec, event_id, fields)
        else:
            status = (await ctx.store.events.take_feedback(mk, event_id, fields)).status
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
    count.labels(*labels, "invalid").inc(len(rejected))
    opened: list[dict[str, Any]] = []
    statuses = await _take_many(ctx, view, spec, valid, rejected, opened)
    accepted = len(examples)
    for (i, _, _), status in zip(valid, statuses, strict=True):
        if status in ("ok", "open"):
            accepted += 1
        elif status in _OUTCOME_ERRORS:
            _, code, message = _OUTCOME_ERRORS[status]
            count.labels(*labels, code).inc()
            rejected.append({"index": i, "error": {"code": code, "message": message,
                                                   "field": f"events[{i}].event_id"}})
    if examples:
        await add_examples(ctx, view, examples)
    count.labels(*labels, "accepted").inc(accepted - len(opened))
    count.labels(*labels, "open").inc(len(opened))
    rejected.sort(key=lambda r: r["index"])
    doc: dict[str, Any] = {"accepted": accepted, "rejected": rejected}
    if opened:
        doc["open"] = opened
    return 202, doc


async def _take_many(ctx: ApiContext, view: ModelView, spec: TaskSpec,
                     valid: list[tuple[int, str, dict[str, np.ndarray]]],
                     rejected: list[dict[str, Any]], opened: list[dict[str, Any]]) -> list[str]:
    """Join the batch's events; per event "ok", "open", "unknown", "duplicate" or "invalid".

    Tasks with feedback in parts go one event at a time (each is a
    compare-and-set step); the others in one pipelined round trip.
    """
    if spec.open_feedback is None:
        outcomes = await ctx.store.events.take_feedback_many(
            view.keys, [(eid, fields) for _, eid, fields in valid]) if valid else []
        return [o.status for o in outcomes]
    statuses = []
    for i, eid, fields in valid:
        try:
            status, more = await take_open(ctx, view, spec, eid, fields)
        except ApiError as exc:
            if exc.status != 422:
                raise
            error = exc.body()["error"]
            error["field"] = f"events[{i}].{exc.field}" if exc.field else f"events[{i}]"
            rejected.append({"index": i, "error": error})
            status = "invalid"
        if more:
            opened.append({"index": i, "event_id": eid, **more})
        statuses.append(status)
    return statuses
