"""Personalizer's feature importances of a loop: named reports of how much each feature
moves the scores of what the loop chose (:mod:`app.evaluation.importance`).

``PUT .../featureImportances/{id}`` with ``name``, ``startTime``, ``endTime`` (and an
optional ``description``) computes the report over the newest :data:`MAX_DECISIONS`
decisions of the decision log in that range, under the model in force, and keeps it
(``status`` ``Succeeded``); ``GET`` reads one or lists them, ``DELETE`` removes one.  The
Personalizer rank routes record the names of the features they hash
(:func:`record_names`), which the reports use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, StringConstraints

from app.api.context import ApiContext
from app.api.decisionrequest import DecisionRequest
from app.api.errors import ApiError
from app.api.ranking import action_features
from app.evaluation.importance import feature_scores, importances
from app.features import hash_feature, named_term
from app.fields import NamedFeatures
from app.learners.base import CandidateRanker
from app.learners.config import ModelConfig
from app.store import codec
from app.store.decisionlog import LogEntry
from app.store.featurenames import ACTION, CONTEXT
from app.store.models import ModelView
from app.store.reports import MAX_REPORTS

#: Most logged decisions one report reads (the newest of its range).
MAX_DECISIONS = 10_000
#: A logged vector as the log stores it.
Stored = np.ndarray | codec.SparseArray
#: Largest stream-id sequence number (the end of a millisecond).
_MAX_SEQ = 2**64 - 1


class ImportanceRequest(BaseModel):
    """Body of a feature-importance report (and the start of an evaluation's): a named
    time range of the log."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    startTime: datetime
    endTime: datetime
    description: Annotated[str, StringConstraints(max_length=1024)] | None = None

    def utc_range(self) -> tuple[datetime, datetime]:
        """``(startTime, endTime)`` in UTC (a naive time is UTC); 400 naming ``endTime``
        when it is before ``startTime``."""
        start, end = (t if t.tzinfo else t.replace(tzinfo=UTC)
                      for t in (self.startTime, self.endTime))
        if end < start:
            raise ApiError(422, "invalid_time_range", "endTime is before startTime", "endTime")
        return start, end


def _fields(request: DecisionRequest) -> Iterator[str]:
    """The name-table fields of a rank request's named features (context and actions; of
    actions seen per slot, as each slot sees them)."""
    for context in request.contexts:
        if isinstance(context, NamedFeatures):
            yield from (f"{CONTEXT}:{named_term(n, v)[0]}" for n, v in context.named.items())
    for candidates in request.candidates or []:
        per_slot = candidates.per_slot
        for features in (candidates.features if per_slot is None
                         else [f for seen in per_slot.features for f in seen]):
            if isinstance(features, NamedFeatures):
                yield from (f"{ACTION}:{named_term(n, v)[0]}"
                            for n, v in features.named.items())


async def record_names(ctx: ApiContext, view: ModelView, request: DecisionRequest) -> None:
    """Add the named features of ``request`` to the model's name table."""
    config = view.config
    sizes = {CONTEXT: config.n_features, ACTION: action_features(config)}

    def bucket(field: str) -> int:
        kind, _, key = field.partition(":")
        return hash_feature(key, sizes[kind])[0]

    await ctx.store.feature_names.record(view.keys, _fields(request), bucket)


def _chosen(entry: LogEntry) -> Iterator[tuple[Stored, Stored]]:
    """``(x, features of the action placed first)`` of each logged ranking of ``entry``, as
    the log stores them (a sparse one stays sparse until :func:`_dense`)."""
    for event in entry.events():
        context: dict[str, Any] = codec.decode_stored(event.context)
        if "x" not in context or "actions" not in context or int(context.get("shown", 0)) < 1:
            continue
        actions = context["actions"]
        yield context["x"], (actions.row(0) if isinstance(actions, codec.SparseArray)
                             else actions[0])


def _dense(value: Stored) -> np.ndarray:
    """A stored vector as floats (a sparse one made dense: one decision at a time)."""
    return value.dense() if isinstance(value, codec.SparseArray) else np.asarray(value,
                                                                                 dtype=float)


async def _decisions(ctx: ApiContext, view: ModelView, start_ms: int,
                     end_ms: int) -> list[tuple[Stored, Stored]]:
    """The newest :data:`MAX_DECISIONS` logged rankings applied in ``[start, end]``."""
    out: list[tuple[Stored, Stored]] = []
    async for entry in ctx.store.log.scan(view.keys, start=f"{start_ms}-0",
                                          end=f"{end_ms}-{_MAX_SEQ}", newest_first=True):
        out.extend(_chosen(entry))
        if len(out) >= MAX_DECISIONS:
            break
    return out[:MAX_DECISIONS]


async def create_report(ctx: ApiContext, view: ModelView, report_id: str,
                        body: ImportanceRequest) -> None:
    """Compute and keep a report (module docstring); 400 naming the field for a range that
    ends before it starts, a learner that does not split its scores, an id taken, or
    :data:`~app.store.importances.MAX_REPORTS` reports held."""
    config: ModelConfig = view.config
    if not config.learner_class.explains_scores:
        raise ApiError(422, "unsupported_configuration", f"{config.algorithm!r} does not split "
                       "its scores by feature: feature importances need a linear ranker",
                       "featureImportanceId")
    start, end = body.utc_range()
    start_ms, end_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    found = await ctx.cache.get(view)
    if found is None:
        raise ApiError(404, "not_found", f"model {config.model_id!r} not found")
    learner, version = found
    rows = await _decisions(ctx, view, start_ms, end_ms)
    scores = await asyncio.to_thread(importances, cast(CandidateRanker, learner),
                                     config.n_features, action_features(config),
                                     ((_dense(x), _dense(a)) for x, a in rows))
    names = await ctx.store.feature_names.names(view.keys)
    report: dict[str, Any] = {
        "id": report_id, "name": body.name, "description": body.description or "",
        "startTime": body.startTime.isoformat(), "endTime": body.endTime.isoformat(),
        "creationTime": datetime.now(UTC).isoformat(), "status": "Succeeded",
        "featureScores": feature_scores(scores, names),
        "decisions": scores.decisions, "modelVersion": version}
    stored = await ctx.store.importances.add(view.keys, report_id, report)
    if stored == "exists":
        raise ApiError(409, "conflict", f"a feature importance {report_id!r} exists: delete "
                       "it first or choose another id", "featureImportanceId")
    if stored == "full":
        raise ApiError(429, "limit_reached", f"the loop holds {MAX_REPORTS} feature "
                       "importances, the most it keeps: delete one first",
                       "featureImportanceId")
