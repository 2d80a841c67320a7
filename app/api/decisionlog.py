"""The decision log over HTTP: pages of JSON Lines, one record per line
(:mod:`app.store.logrecords` describes them).

Pages end at a position in the log, ``"<entry id>:<lines of it seen>"``,
which the next request passes as ``after``.  Read oldest first by default, or
newest first (``order=desc``): then the entries come from the newest down,
each entry's lines in reverse, and the lines seen of an entry are counted
from its end.
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
from app.store.logrecords import entry_records
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


def entry_lines(entry: LogEntry, skip: int, limit: int, newest_first: bool = False
                ) -> list[bytes]:
    """JSON lines (with their newlines) of an entry's items ``skip`` to ``skip + limit``,
    counted from its first item, or with ``newest_first`` from its last one backwards."""
    if newest_first:
        stop = entry.size - skip
        begin = max(0, stop - limit)
        records = entry_records(entry, begin, stop - begin)[::-1]
    else:
        records = entry_records(entry, skip, limit)
    return [orjson.dumps(record) + b"\n" for record in records]


@dataclass(frozen=True)
class LogPage:
    """A page of the log as JSON Lines and the ``after`` of the next page (None: the last)."""

    body: bytes
    next_after: str | None



async def read_page(log: DecisionLogStore, mk: ModelKeys, *, since_ms: int | None,
                    until_ms: int | None, after: str | None, limit: int,
                    newest_first: bool = False) -> LogPage:
    """Up to ``limit`` lines of the entries applied in ``[since, until]`` (ms, inclusive)
    after the position ``after`` (``"<entry id>"``: after that entry, ``"<entry id>:<k>"``:
    after its first ``k`` lines), oldest first or ``newest_first`` (module docstring);
    decoded in a thread (a page of 10,000 ranked events is CPU work)."""
    low = "-" if since_ms is None else f"{since_ms}-0"
    high = "+" if until_ms is None else f"{until_ms}-{MAX_SEQ}"
    skip_in = None
    if after is not None:
        entry_id, _, k = after.partition(":")
        position = parse_stream_id(entry_id)
        inside = (until_ms is None or position <= (until_ms, MAX_SEQ)) if newest_first \
            else (since_ms is None or position >= (since_ms, 0))
        if inside:  # else the time bound comes later in the reading order: it wins
            if newest_first and not k and position == (0, 0):
                return LogPage(b"", None)  # nothing is older (Redis refuses the bound "(0-0")
            bound, skip_in = (entry_id, (entry_id, int(k))) if k else (f"({entry_id}", None)
            low, high = (low, bound) if newest_first else (bound, high)
    lines: list[bytes] = []
    async for entry in log.scan(mk, start=low, end=high, newest_first=newest_first,
                                events_per_read=limit):
        skip = skip_in[1] if skip_in and entry.entry_id == skip_in[0] else 0
        if skip >= entry.size:
            continue
        if len(lines) == limit:  # full, and this entry has more: the next page starts here
            return LogPage(b"".join(lines), f"{entry.entry_id}:{skip}")
        wanted = limit - len(lines)
        lines += await asyncio.to_thread(entry_lines, entry, skip, wanted, newest_first)
        if skip + wanted < entry.size:
            return LogPage(b"".join(lines), f"{entry.entry_id}:{skip + wanted}")
    return LogPage(b"".join(lines), None)
