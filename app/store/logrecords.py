"""Decision-log entries as JSON records: one per logged event (or marker).

Each logged event (:mod:`app.store.decisionlog`) becomes one JSON object.
An applied event::

    {"type": "event", "stream_id", "time", "joined_at", "event_id", "kind",
     "model_version", "features", ...task fields..., "context", "feedback"}

``stream_id`` is the event's id on the model's event stream (its
identity; a marker's is its id in the log), ``time`` when the event was
applied (UTC, ISO 8601), ``joined_at`` when its feedback was joined (or its
decision expired), ``kind`` ``feedback`` or ``timeout``
(a sweeper's default event).  The logged decision context is laid out by
what it holds, not by algorithm: ``x`` becomes ``features``; a played label
(``played``, ``prob``, ``greedy``) becomes ``action``, ``propensity`` and
``greedy_action``; a ranking keeps ``n_candidates`` (the candidates the
request offered), and its ``shown`` slots of ``ids``, ``actions``,
``scores``, ``probabilities``, with the feedback's per-slot ``clicks``,
become ``slots``: per shown slot its ``id_hash`` (the 64-bit hash of the
candidate id the request named), ``features``, ``propensity`` (placement
probability given the slots before), ``score`` and ``click``.  Every other
field stays under ``context`` or ``feedback`` (absent when none is left).

A vector the log stored sparse (:mod:`app.store.codec`: a wide, mostly zero
context) stays sparse in its line, in the form a request sends sparse features
plus its length: ``{"size": n, "indices": [...], "values": [...]}`` (indices
ascending); so does a sparse-stored ranking's per-slot ``features``.  A dense
vector is a JSON list, as before
(:func:`app.evaluation.servicelog.dense_vector` reads either form).
A marker::

    {"type": "rollback" | "promote" | "reset" | ..., "stream_id", "time", ...detail}
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from app.store import codec
from app.store.deadletters import json_value
from app.store.decisionlog import LogEntry, LoggedEvent
from app.store.util import parse_stream_id, text

#: Context fields of a played label and their names in a line.
_LABEL_FIELDS = {"played": "action", "prob": "propensity", "greedy": "greedy_action"}
#: Context fields of a ranking (laid out per slot) and the per-slot feedback field.
_SLOT_FIELDS = {"ids": "id_hash", "actions": "features", "probabilities": "propensity",
                "scores": "score"}
_SLOT_FEEDBACK = "clicks"



def iso_ms(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601."""
    return datetime.fromtimestamp(ms / 1000.0, UTC).isoformat(timespec="milliseconds")


def wire_value(value: np.ndarray | codec.SparseArray) -> Any:
    """An array as a line's JSON value: a stored-sparse vector in the sparse form (module
    docstring), any other array as (nested) lists."""
    if isinstance(value, codec.SparseArray):
        if len(value.shape) != 1:
            return json_value(value.dense())
        return {"size": value.shape[0], "indices": value.indices.tolist(),
                "values": json_value(value.values)}
    return json_value(np.asarray(value))


def _item(column: np.ndarray | codec.SparseArray, k: int) -> np.ndarray | codec.SparseArray:
    return column.row(k) if isinstance(column, codec.SparseArray) else np.asarray(column[k])


def _slots(context: dict[str, Any], feedback: dict[str, Any]) -> list[dict[str, Any]]:
    """The shown slots of a ranking (the fields are taken out of ``context``/``feedback``)."""
    shown = int(context.pop("shown"))
    columns = {name: context.pop(field) for field, name in _SLOT_FIELDS.items()
               if field in context}
    clicks = feedback.pop(_SLOT_FEEDBACK, None)
    out = []
    for k in range(shown):
        slot: dict[str, Any] = {"slot": k}
        slot.update((name, wire_value(_item(col, k))) for name, col in columns.items())
        if clicks is not None:
            slot["click"] = wire_value(_item(clicks, k))
        out.append(slot)
    return out


def event_record(entry: LogEntry, event: LoggedEvent) -> dict[str, Any]:
    """The JSON object of one logged event of the batch ``entry`` (module docstring)."""
    context: dict[str, Any] = codec.decode_stored(event.context)
    feedback: dict[str, Any] = codec.decode_stored(event.feedback)
    line: dict[str, Any] = {
        "type": "event", "stream_id": event.stream_id, "time": iso_ms(entry.applied_ms),
        "joined_at": iso_ms(parse_stream_id(event.stream_id)[0]), "event_id": event.event_id,
        "kind": event.kind, "model_version": event.version}
    if "x" in context:
        line["features"] = wire_value(context.pop("x"))
    for field, name in _LABEL_FIELDS.items():
        if field in context:
            line[name] = wire_value(context.pop(field))
    if "n_candidates" in context:
        line["n_candidates"] = int(context.pop("n_candidates"))
    if "shown" in context:
        line["slots"] = _slots(context, feedback)
    for name, rest in (("context", context), ("feedback", feedback)):
        if rest:  # (an empty object would be a column without fields in a Parquet export)
            line[name] = {field: wire_value(arr) for field, arr in rest.items()}
    return line


def marker_record(entry: LogEntry) -> dict[str, Any]:
    """The JSON object of one marker: its type, id, time and detail."""
    detail: Mapping[str, Any] = orjson.loads(entry.fields.get(b"d") or b"{}")
    return {**detail, "type": text(entry.fields.get(b"m")), "stream_id": entry.entry_id,
            "time": iso_ms(entry.applied_ms)}


def entry_records(entry: LogEntry, skip: int = 0, limit: int | None = None
                  ) -> list[dict[str, Any]]:
    """The records of an entry's items ``skip`` to ``skip + limit`` (all by default)."""
    stop = None if limit is None else skip + limit
    if entry.is_marker:
        return [marker_record(entry)][skip:stop]
    return [event_record(entry, event) for event in entry.events()[skip:stop]]
