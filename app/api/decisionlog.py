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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from app.api.errors import ApiError
from app.store.decisionlog import DecisionLogStore, LogEntry, LoggedEvent
from app.store.keys import ModelKeys
from app.store.logrecords import event_record, marker_record
from app.store.util import parse_stream_id

#: Lines per page by default and at most.
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
#: Bytes of JSON Lines a page holds at most, whatever its ``limit`` (a line larger than that
#: alone is a page of its own): what one request may take of the process's memory.
MAX_PAGE_BYTES = 8 * 1024 * 1024
#: A page of at most this many bytes is sent from its one read; a larger one is streamed
#: from a second read (:func:`read_page`).
BUFFERED_PAGE_BYTES = 1024 * 1024
#: Lines decoded, looked up and encoded together: a chunk of a streamed page.
CHUNK_LINES = 256
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
class Span:
    """Where a page reads: the entries with ids in ``[low, high]`` (``(id`` excludes) in the
    reading order, the first ``skip`` lines of entry ``skip_entry`` left out."""

    low: str
    high: str
    newest_first: bool
    skip_entry: str | None = None
    skip: int = 0


def page_span(since_ms: int | None, until_ms: int | None, after: str | None,
              newest_first: bool) -> Span | None:
    """The span of the entries applied in ``[since, until]`` (ms, inclusive) after the
    position ``after`` (``"<entry id>"``: after that entry, ``"<entry id>:<k>"``: after its
    first ``k`` lines) in the reading order; None when nothing can come."""
    low = "-" if since_ms is None else f"{since_ms}-0"
    high = "+" if until_ms is None else f"{until_ms}-{MAX_SEQ}"
    if after is None:
        return Span(low, high, newest_first)
    entry_id, _, k = after.partition(":")
    position = parse_stream_id(entry_id)
    inside = (until_ms is None or position <= (until_ms, MAX_SEQ)) if newest_first \
        else (since_ms is None or position >= (since_ms, 0))
    if not inside:  # the time bound comes later in the reading order: it wins
        return Span(low, high, newest_first)
    if newest_first and not k and position == (0, 0):
        return None  # nothing is older (Redis refuses the bound "(0-0")
    bound = entry_id if k else f"({entry_id}"
    low, high = (low, bound) if newest_first else (bound, high)
    return Span(low, high, newest_first, entry_id if k else None, int(k or 0))


def _records(entry: LogEntry, events: list[LoggedEvent], begin: int, count: int,
             newest_first: bool) -> list[dict[str, Any]]:
    """The records of an entry's lines ``begin`` to ``begin + count`` in the reading order
    (``events``: the entry's, decoded once)."""
    if entry.is_marker:
        return [marker_record(entry)][begin:begin + count]
    order = range(begin, min(entry.size, begin + count))
    return [event_record(entry, events[entry.size - 1 - k if newest_first else k])
            for k in order]


def _lines(records: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(record) + b"\n" for record in records]


class PageReader:
    """One read of a page: :meth:`chunks` yields its JSON Lines as read from Redis (a chunk
    per :data:`CHUNK_LINES` lines at most), up to ``limit`` lines and ``max_bytes`` (one
    larger line alone is a page); then :attr:`next_after` is the position of the next page
    (None: the last), :attr:`lines` the lines read and :attr:`first_entry`,
    :attr:`last_entry` the entries they came from."""

    def __init__(self, log: DecisionLogStore, mk: ModelKeys, span: Span, limit: int,
                 max_bytes: float) -> None:
        self.log = log
        self.mk = mk
        self.span = span
        self.limit = limit
        self.max_bytes = max_bytes
        self.lines = 0
        self.size = 0
        self.first_entry: str | None = None
        self.last_entry: str | None = None
        self.next_after: str | None = None

    def replay_span(self) -> Span:
        """The span of exactly the entries this read took lines from (read again with
        ``limit`` = :attr:`lines`, it gives the same lines: entries appended meanwhile are
        outside it)."""
        first, last = self.first_entry or "0-0", self.last_entry or "0-0"
        low, high = (last, first) if self.span.newest_first else (first, last)
        return Span(low, high, self.span.newest_first, self.span.skip_entry, self.span.skip)

    async def chunks(self) -> AsyncIterator[bytes]:
        span = self.span
        async for entry in self.log.scan(self.mk, start=span.low, end=span.high,
                                         newest_first=span.newest_first,
                                         events_per_read=self.limit):
            skip = span.skip if entry.entry_id == span.skip_entry else 0
            if skip >= entry.size:
                continue
            if self.lines == self.limit or self.size >= self.max_bytes:
                self.next_after = f"{entry.entry_id}:{skip}"  # full, and this entry has more
                return
            events = await asyncio.to_thread(entry.events)
            while skip < entry.size:
                wanted = min(CHUNK_LINES, self.limit - self.lines)
                records = await asyncio.to_thread(_records, entry, events, skip, wanted,
                                                  span.newest_first)
                lines = await asyncio.to_thread(
                    _lines, await with_item_ids(self.log, self.mk, records))
                taken = self._take(lines)
                if taken:
                    self.first_entry = self.first_entry or entry.entry_id
                    self.last_entry = entry.entry_id
                    yield b"".join(lines[:taken])
                skip += taken
                if taken < len(lines) or (skip < entry.size and self.lines == self.limit):
                    self.next_after = f"{entry.entry_id}:{skip}"
                    return

    def _take(self, lines: list[bytes]) -> int:
        """How many of ``lines`` fit the page (counted in :attr:`lines` and :attr:`size`)."""
        taken = 0
        for line in lines:
            if self.size + len(line) > self.max_bytes and self.lines:
                break
            self.lines += 1
            self.size += len(line)
            taken += 1
        return taken


@dataclass(frozen=True)
class LogPage:
    """A page of the log as JSON Lines (the bytes, or chunks to stream) and the ``after`` of
    the next page (None: the last)."""

    body: bytes | AsyncIterator[bytes]
    next_after: str | None


async def read_page(log: DecisionLogStore, mk: ModelKeys, *, since_ms: int | None,
                    until_ms: int | None, after: str | None, limit: int,
                    newest_first: bool = False, max_bytes: int | None = None) -> LogPage:
    """Up to ``limit`` lines, and at most ``max_bytes`` of them (default
    :data:`MAX_PAGE_BYTES`; one larger line alone is a page), of the entries applied in
    ``[since, until]`` (ms, inclusive) after the position ``after`` (:func:`page_span`),
    oldest first or ``newest_first`` (module docstring); decoded in a thread.

    The next page's position goes in a header, before the body, so it is known before a
    line is sent: the page is read once to find where it ends, and kept when it is at most
    :data:`BUFFERED_PAGE_BYTES`; a larger one is read again and streamed as it is read
    (the same lines: the second read is bounded to the entries and lines of the first), so
    what a page holds in memory does not grow with the page."""
    span = page_span(since_ms, until_ms, after, newest_first)
    if span is None:
        return LogPage(b"", None)
    reader = PageReader(log, mk, span, limit, MAX_PAGE_BYTES if max_bytes is None
                        else max_bytes)
    kept: list[bytes] | None = []
    async for chunk in reader.chunks():
        if kept is not None:
            kept.append(chunk)
            if reader.size > BUFFERED_PAGE_BYTES:
                kept = None  # too large to hold: counted on, streamed from a second read
    if kept is not None:
        return LogPage(b"".join(kept), reader.next_after)
    # no byte bound on the second read: a line of the first never moves to the next page
    again = PageReader(log, mk, reader.replay_span(), reader.lines, math.inf)
    return LogPage(again.chunks(), reader.next_after)
