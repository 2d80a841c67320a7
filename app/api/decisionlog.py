"""The decision log over HTTP: pages of JSON Lines, one record per line
(:mod:`app.store.logrecords` describes them; a ranking's slots also carry the
``id`` the request sent, from the model's id table, or null when it does not
know the slot's ``id_hash``).

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
from typing import Any

import orjson

from app.api.errors import ApiError
from app.store.decisionlog import DecisionLogStore, LogEntry
from app.store.keys import ModelKeys
from app.store.logrecords import entry_records
from app.store.util import parse_stream_id

#: Lines per page by default and at most.
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
#: Bytes of JSON Lines a page holds at most, whatever its ``limit`` (a line larger than that
#: alone is a page of its own): what one request may take of the process's memory.
MAX_PAGE_BYTES = 8 * 1024 * 1024
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


def entry_page(entry: LogEntry, skip: int, limit: int, newest_first: bool = False,
               max_bytes: float = math.inf, first: bool = True
               ) -> tuple[list[dict[str, Any]], int]:
    """Records of an entry's items ``skip`` to ``skip + limit``, counted from its first item,
    or with ``newest_first`` from its last one backwards, decoded one at a time and ending
    before the first whose JSON line would bring theirs past ``max_bytes`` (with ``first``,
    the first record is taken whatever its size); with the bytes of their lines."""
    stop = min(entry.size, skip + limit)
    out: list[dict[str, Any]] = []
    used = 0
    for k in range(skip, stop):
        begin = entry.size - 1 - k if newest_first else k
        [record] = entry_records(entry, begin, 1)
        size = len(orjson.dumps(record)) + 1
        if used + size > max_bytes and (out or not first):
            break
        out.append(record)
        used += size
    return out, used


async def with_item_ids(log: DecisionLogStore, mk: ModelKeys,
                        records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with each shown slot's ``id``: the id the request sent, from the model's id
    table (None when the table does not know its hash)."""
    hashes = [int(slot["id_hash"]) for record in records for slot in record.get("slots", ())]
    if not hashes:
        return records
    ids = await log.item_ids(mk, hashes)
    for record in records:
        if "slots" in record:
            record["slots"] = [{"slot": slot["slot"], "id": ids.get(int(slot["id_hash"])),
                                **slot} for slot in record["slots"]]
    return records


@dataclass(frozen=True)
class LogPage:
    """A page of the log as JSON Lines and the ``after`` of the next page (None: the last)."""

    body: bytes
    next_after: str | None



async def read_page(log: DecisionLogStore, mk: ModelKeys, *, since_ms: int | None,
                    until_ms: int | None, after: str | None, limit: int,
                    newest_first: bool = False, max_bytes: int | None = None) -> LogPage:
    """Up to ``limit`` lines, and at most ``max_bytes`` of them (default
    :data:`MAX_PAGE_BYTES`; one larger line alone is a page), of the entries applied in
    ``[since, until]`` (ms, inclusive) after the position ``after`` (``"<entry id>"``: after
    that entry, ``"<entry id>:<k>"``: after its first ``k`` lines), oldest first or
    ``newest_first`` (module docstring); decoded in a thread (a page of 10,000 ranked events
    is CPU work)."""
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
    budget = MAX_PAGE_BYTES if max_bytes is None else max_bytes
    records: list[dict[str, Any]] = []
    used = 0
    async for entry in log.scan(mk, start=low, end=high, newest_first=newest_first,
                                events_per_read=limit):
        skip = skip_in[1] if skip_in and entry.entry_id == skip_in[0] else 0
        if skip >= entry.size:
            continue
        if len(records) == limit or used >= budget:  # full, and this entry has more
            return await _page(log, mk, records, f"{entry.entry_id}:{skip}")
        wanted = limit - len(records)
        taken, size = await asyncio.to_thread(
            entry_page, entry, skip, wanted, newest_first, budget - used, not records)
        records += taken
        used += size
        if skip + len(taken) < entry.size:
            return await _page(log, mk, records, f"{entry.entry_id}:{skip + len(taken)}")
    return await _page(log, mk, records, None)


async def _page(log: DecisionLogStore, mk: ModelKeys, records: list[dict[str, Any]],
                next_after: str | None) -> LogPage:
    """The page of ``records`` (their slots' ids looked up) as JSON Lines."""
    records = await with_item_ids(log, mk, records)
    body = await asyncio.to_thread(lambda: b"".join(orjson.dumps(r) + b"\n" for r in records))
    return LogPage(body, next_after)
