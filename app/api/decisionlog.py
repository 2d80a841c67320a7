"""The decision log over HTTP: pages of JSON Lines, one record per line
(:mod:`app.store.logrecords` describes them).

Pages end at a position in the log, ``"<entry id>:<lines of it seen>"``,
which the next request passes as ``after``.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from app.api.errors import ApiError
from app.store.decisionlog import DecisionLogStore, LogEntry
from app.store.keys import ModelKeys
from app.store.logrecords import entry_records, entry_size
from app.store.util import parse_stream_id

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


def entry_lines(entry: LogEntry, skip: int, limit: int) -> list[bytes]:
    """JSON lines (with their newlines) of an entry's items ``skip`` to ``skip + limit``."""
    return [orjson.dumps(record) + b"\n" for record in entry_records(entry, skip, limit)]


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
