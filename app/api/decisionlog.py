"""The decision log as JSON Lines: one joined event (or marker) per line.

Each stored entry (:mod:`app.store.decisionlog`) becomes one JSON object.
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
``greedy_action``; a ranking (``shown`` slots of ``ids``, ``actions``,
``scores``, ``probabilities``, with the feedback's per-slot ``clicks``)
becomes ``slots``: per shown slot its ``id_hash`` (the 64-bit hash of the
candidate id the request named), ``features``, ``propensity`` (placement
probability given the slots before), ``score`` and ``click``.  Every other
field stays under ``context`` or ``feedback`` (absent when none is left).
A marker::

    {"type": "rollback" | "promote" | "reset" | ..., "stream_id", "time", ...detail}

Pages end at a position in the log, ``"<entry id>:<lines of it seen>"``,
which the next request passes as ``after``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson

from app.api.errors import ApiError
from app.store import codec
from app.store.deadletters import json_value
from app.store.decisionlog import DecisionLogStore, LogEntry, LoggedEvent
from app.store.keys import ModelKeys
from app.store.util import parse_stream_id, text

#: Lines per page by default and at most.
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
#: Response header with the ``after`` of the next page (absent on the last page).
#: A position in the log: an entry id, optionally with ``:<lines of it already seen>``.
POSITION_PATTERN = r"^[0-9]{1,19}-[0-9]{1,19}(:[0-9]{1,6})?$"
NEXT_HEADER = "X-Next-After"
MEDIA_TYPE = "application/x-ndjson"
#: Latest time a bound may name (the end of year 9999, Unix seconds).
LATEST_SECONDS = 253_402_300_799
#: Largest sequence number of a stream id (the end of a millisecond).
MAX_SEQ = 2**64 - 1

#: Context fields of a played label and their names in a line.
_LABEL_FIELDS = {"played": "action", "prob": "propensity", "greedy": "greedy_action"}
#: Context fields of a ranking (laid out per slot) and the per-slot feedback field.
_SLOT_FIELDS = {"ids": "id_hash", "actions": "features", "probabilities": "propensity",
                "scores": "score"}
_SLOT_FEEDBACK = "clicks"


def iso_ms(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601."""
    return datetime.fromtimestamp(ms / 1000.0, UTC).isoformat(timespec="milliseconds")


def parse_time(value: str, field: str) -> int:
    """``since``/``until`` (ISO 8601, naive = UTC, or Unix seconds) as ms since the epoch;
    422 naming ``field`` otherwise."""
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise ApiError(422, "invalid_param", f"{value!r} is neither ISO 8601 nor Unix "
                           "seconds", field) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp()
    if not (math.isfinite(seconds) and 0 <= seconds <= LATEST_SECONDS):
        raise ApiError(422, "invalid_param", f"{value!r} is not a time in 1970-9999", field)
    return int(seconds * 1000)


def _slots(context: dict[str, np.ndarray], feedback: dict[str, np.ndarray]
           ) -> list[dict[str, Any]]:
    """The shown slots of a ranking (the fields are taken out of ``context``/``feedback``)."""
    shown = int(context.pop("shown"))
    columns = {name: context.pop(field) for field, name in _SLOT_FIELDS.items()
               if field in context}
    clicks = feedback.pop(_SLOT_FEEDBACK, None)
    out = []
    for k in range(shown):
        slot: dict[str, Any] = {"slot": k}
        slot.update((name, json_value(np.asarray(col[k]))) for name, col in columns.items())
        if clicks is not None:
            slot["click"] = json_value(np.asarray(clicks[k]))
        out.append(slot)
    return out


def event_line(entry: LogEntry, event: LoggedEvent) -> dict[str, Any]:
    """The JSON object of one logged event of the batch ``entry`` (module docstring)."""
    context = codec.decode(event.context)
    feedback = codec.decode(event.feedback)
    line: dict[str, Any] = {
        "type": "event", "stream_id": event.stream_id, "time": iso_ms(entry.applied_ms),
        "joined_at": iso_ms(parse_stream_id(event.stream_id)[0]), "event_id": event.event_id,
        "kind": event.kind, "model_version": event.version}
    if "x" in context:
        line["features"] = json_value(np.asarray(context.pop("x")))
    for field, name in _LABEL_FIELDS.items():
        if field in context:
            line[name] = json_value(np.asarray(context.pop(field)))
    if "shown" in context:
        line["slots"] = _slots(context, feedback)
    for name, rest in (("context", context), ("feedback", feedback)):
        if rest:  # (an empty object would be a column without fields in a Parquet export)
            line[name] = {field: json_value(arr) for field, arr in rest.items()}
    return line


def marker_line(entry: LogEntry) -> dict[str, Any]:
    """The JSON object of one marker: its type, id, time and detail."""
    detail: Mapping[str, Any] = orjson.loads(entry.fields.get(b"d") or b"{}")
    return {**detail, "type": text(entry.fields.get(b"m")), "stream_id": entry.entry_id,
            "time": iso_ms(entry.applied_ms)}


def entry_lines(entry: LogEntry, skip: int, limit: int) -> list[bytes]:
    """JSON lines (with their newlines) of an entry's items ``skip`` to ``skip + limit``."""
    if entry.is_marker:
        return [orjson.dumps(marker_line(entry)) + b"\n"][skip:skip + limit]
    return [orjson.dumps(event_line(entry, event)) + b"\n"
            for event in entry.events()[skip:skip + limit]]


def entry_size(entry: LogEntry) -> int:
    """Lines of an entry: its events, or 1 for a marker."""
    return 1 if entry.is_marker else int(entry.fields[b"n"])


@dataclass(frozen=True)
class LogPage:
    """A page of the log as JSON Lines and the ``after`` of the next page (None: the last)."""

    body: bytes
    next_after: str | None


#: Entries read per round trip while a page fills.
_CHUNK = 16


async def read_page(log: DecisionLogStore, mk: ModelKeys, *, since_ms: int | None,
                    until_ms: int | None, after: str | None, limit: int) -> LogPage:
    """Up to ``limit`` lines of the entries applied in ``[since, until]`` (ms, inclusive)
    after the position ``after`` (``"<entry id>"``: after that entry, ``"<entry id>:<k>"``:
    after its first ``k`` lines); decoded in a thread (a page of 10,000 ranked events is
    CPU work)."""
    start, skip_in = ("-" if since_ms is None else f"{since_ms}-0"), None
    if after is not None:
        entry_id, _, k = after.partition(":")
        if since_ms is None or parse_stream_id(entry_id) >= (since_ms, 0):
            start, skip_in = (entry_id, (entry_id, int(k))) if k else (f"({entry_id}", None)
    end = "+" if until_ms is None else f"{until_ms}-{MAX_SEQ}"
    lines: list[bytes] = []
    while True:
        entries = await log.read(mk, start=start, end=end, count=_CHUNK)
        for entry in entries:
            skip = skip_in[1] if skip_in and entry.entry_id == skip_in[0] else 0
            size = entry_size(entry)
            if skip >= size:
                continue
            if len(lines) == limit:  # full, and this entry has more: the next page starts here
                return LogPage(b"".join(lines), f"{entry.entry_id}:{skip}")
            wanted = limit - len(lines)
            lines += await asyncio.to_thread(entry_lines, entry, skip, wanted)
            if skip + wanted < size:
                return LogPage(b"".join(lines), f"{entry.entry_id}:{skip + wanted}")
        if len(entries) < _CHUNK:
            return LogPage(b"".join(lines), None)
        start = f"({entries[-1].entry_id}"
