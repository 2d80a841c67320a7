"""A model's decision log: every applied event, kept for counterfactual evaluation.

The trainer trims applied entries from the event stream, so the log keeps a
copy of each one on its own stream (``nl:{T:M}:log``).  The copy is written
by the same Lua step that publishes the snapshot the events went into
(``publish_snapshot.lua``), so an event is logged exactly when it changed
the model: never twice across a crash between the publish and the
acknowledgement, never lost.  Dead-lettered entries are not applied and
not logged.

One log entry holds one published batch (:class:`LoggedBatch`): ``k`` =
``events``, ``v`` the version it was published in, ``n`` its events, and
per event the event stream's fields (its stream id, kind ``feedback`` or
``timeout``, event id, decision context blob, feedback blob), each column
stored as the concatenated values (``s``, ``t``, ``e``, ``c``, ``f``) plus
one array of every value's length (``L``).  A stream entry per event cost
twice the log's Redis CPU: each command of a script is propagated to the
AOF on its own.  The entry id is the time the batch was applied.  A marker
entry, written by the Lua step that makes the change it records
(``lib_log_marker.lua``, included by the rollback, promote, explicit-publish and
drift-marker scripts), records what happened to the
model (``k`` = ``marker``, ``m`` its type, one of :data:`MARKER_TYPES`, ``d`` its
detail as JSON), its entry id being its time.

A ranking's shown candidates are logged as 64-bit hashes of the ids the
request sent (``ids``, ``id_hash`` in a record).  A rank model's id table
(``nl:{T:M}:item-ids``, a hash: id hash in decimal -> id) maps them back:
the Lua step that logs the decisions adds each shown id it does not know yet
(``record_decisions.lua``), so a known id costs one HSETNX that writes
nothing (no AOF traffic); :meth:`DecisionLogStore.item_ids` reads it for an
export.  The table holds at most :data:`MAX_ITEM_IDS` ids: beyond, new ids
are not kept (their records show the hash only).  It is not trimmed with the
log: one entry per distinct id ever shown, about 70 bytes plus the id's
length each (82 bytes for 12-character ids in a table of 100,000).

Retention (:class:`LogRetention`): the publish keeps the number of events
logged in the model's stats hash (``log_events``) and each batch's id and
size in a list (``nl:{T:M}:log-index``), and drops the oldest batches (and
the markers before them) while the rest hold at least ``max_events``
events, or while they are older than ``max_age_seconds``: so the log holds
the newest ``max_events`` events plus less than one batch.  One publish drops
at most 100 batches (a backlog goes over the next publishes, never blocking
Redis in one call).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import redis.asyncio as aioredis

from app.store import keys
from app.store.keys import ModelKeys
from app.store.util import text

#: Events kept per model by default (the newest).
DEFAULT_MAX_EVENTS = 1_000_000
#: Seconds an entry is kept by default (7 days).
DEFAULT_MAX_AGE_SECONDS = 7 * 86_400
#: ``k`` of a marker entry (``lib_log_marker.lua`` writes it) and of a batch of events.
MARKER_KIND = "marker"
EVENTS_KIND = "events"
#: Every marker type (``m``) the log holds: a rollback, a promotion, a reset, a detection of
#: the model's drift detector and the refit it made (``drift.action: recover``).
MARKER_TYPES = ("rollback", "promote", "reset", "drift", "drift_recovery")
#: Fields of a batch entry holding one column each, in the order of their lengths in ``L``.
COLUMNS = (b"s", b"t", b"e", b"c", b"f")
#: Field of a model's stats hash: events in its log now.
LOGGED_FIELD = "log_events"
#: Most ids a rank model's id table holds.
MAX_ITEM_IDS = 1_000_000
#: :meth:`DecisionLogStore.scan`: a read grows while it holds fewer events, up to this many
#: entries.
EVENTS_PER_READ = 10_000
MAX_ENTRIES_PER_READ = 256


@dataclass(frozen=True)
class LogRetention:
    """How much of a model's decision log is kept: ``max_events`` events (0 turns the log
    off) no older than ``max_age_seconds`` (0: no age limit)."""

    max_events: int = DEFAULT_MAX_EVENTS
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS

    @property
    def enabled(self) -> bool:
        return self.max_events > 0

    def min_ms(self, now: float | None = None) -> int:
        """Oldest apply time kept by age, in ms (0: no age limit)."""
        if self.max_age_seconds <= 0:
            return 0
        now = time.time() if now is None else now
        return max(0, int((now - self.max_age_seconds) * 1000))


@dataclass(frozen=True)
class LoggedBatch:
    """The stored fields of the events of one publish, packed for the log (see the module
    docstring): ``n``, the lengths ``L`` and one concatenated value per column."""

    n: int
    lengths: bytes
    columns: tuple[bytes, ...]

    @classmethod
    def pack(cls, columns: Sequence[Sequence[str | bytes]]) -> LoggedBatch:
        """Pack per-event values, one sequence per field of :data:`COLUMNS` (``str`` values
        are ASCII, e.g. stream ids)."""
        lengths = np.concatenate([np.fromiter(map(len, col), dtype=np.uint32, count=len(col))
                                  for col in columns]).astype(">u4")
        joined = tuple("".join(cast(Sequence[str], col)).encode()
                       if col and isinstance(col[0], str)
                       else b"".join(cast(Sequence[bytes], col)) for col in columns)
        return cls(len(columns[0]), lengths.tobytes(), joined)

    def args(self) -> list[bytes | int]:
        """The publish script's arguments: ``n``, ``L``, then the columns."""
        return [self.n, self.lengths, *self.columns]


@dataclass(frozen=True)
class LoggedEvent:
    """One logged event as stored on the event stream, with the version it went into."""

    stream_id: str
    kind: str
    event_id: str
    context: bytes
    feedback: bytes
    version: int


@dataclass(frozen=True)
class LogEntry:
    """One stored log entry: its id and fields as stored (bytes)."""

    entry_id: str
    fields: dict[bytes, bytes]

    @property
    def is_marker(self) -> bool:
        return self.fields.get(b"k") == MARKER_KIND.encode()

    @property
    def size(self) -> int:
        """Lines of the entry: its events, or 1 for a marker."""
        return 1 if self.is_marker else int(self.fields[b"n"])

    @property
    def applied_ms(self) -> int:
        """Time the entry was written (ms since the epoch)."""
        return int(self.entry_id.partition("-")[0])

    def events(self) -> list[LoggedEvent]:
        """The events of a batch entry, in the order applied (none for a marker)."""
        if self.is_marker:
            return []
        n, version = int(self.fields[b"n"]), int(self.fields[b"v"])
        lengths = np.frombuffer(self.fields[b"L"], dtype=">u4").reshape(len(COLUMNS), n)
        split = [split_packed(self.fields[name], row) for name, row in zip(COLUMNS, lengths,
                                                                      strict=True)]
        return [LoggedEvent(s.decode(), t.decode(), e.decode(), c, f, version)
                for s, t, e, c, f in zip(*split, strict=True)]


def split_packed(data: bytes, lengths: np.ndarray) -> list[bytes]:
    """The values packed back to back in ``data``, of ``lengths`` bytes each.

    >>> split_packed(b"abcdef", np.array([1, 0, 5]))
    [b'a', b'', b'bcdef']
    """
    ends = np.cumsum(lengths).tolist()
    return [data[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


class DecisionLogStore:
    """Read a model's decision log (batches of events are appended by
    :meth:`~app.store.snapshots.SnapshotStore.publish`, markers by the step of the change
    they record)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def published(self, mk: ModelKeys) -> str | None:
        """Id of the newest entry published to Kafka (None: none yet)."""
        return text(await self.redis.get(mk.log_published))

    async def publishing_since(self) -> str:
        """The entry id (Redis clock) from which the log of a model never published to Kafka
        is published: the time this was first asked, kept (entries written before publishing
        began are not published)."""
        seconds, micros = await self.redis.time()
        await self.redis.set(keys.DECISIONS_SINCE, f"{seconds * 1000 + micros // 1000}-0",
                             nx=True)
        return text(await self.redis.get(keys.DECISIONS_SINCE)) or "0-0"

    async def set_published(self, mk: ModelKeys, entry_id: str) -> None:
        """Record that the entries up to ``entry_id`` were published to Kafka."""
        await self.redis.set(mk.log_published, entry_id)

    async def read(self, mk: ModelKeys, *, start: str = "-", end: str = "+",
                   count: int = 1000, newest_first: bool = False) -> list[LogEntry]:
        """Up to ``count`` entries with ids in ``[start, end]`` (``(id`` excludes), oldest
        first, or with ``newest_first`` the newest first (from ``end`` down)."""
        if newest_first:
            reply: Any = await self.redis.xrevrange(mk.log, max=end, min=start, count=count)
        else:
            reply = await self.redis.xrange(mk.log, min=start, max=end, count=count)
        return [LogEntry(text(entry_id) or "0-0", fields) for entry_id, fields in reply]

    async def clear(self, mk: ModelKeys) -> None:
        """Delete every entry of the log (events and markers) and its index, at once (the
        trainer's next publish logs on into an empty log)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(mk.log, mk.log_index)
            pipe.hset(mk.stats, LOGGED_FIELD, 0)
            await pipe.execute()

    async def item_ids(self, mk: ModelKeys, hashes: Sequence[int]) -> dict[int, str]:
        """The ids of the candidate id hashes the model's id table knows (module docstring)."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        found: Any = await self.redis.hmget(mk.item_ids, [str(h) for h in wanted])
        return {h: text(value) or "" for h, value in zip(wanted, found, strict=True)
                if value is not None}

    async def scan(self, mk: ModelKeys, *, start: str = "-", end: str = "+",
                   newest_first: bool = False,
                   events_per_read: int = EVENTS_PER_READ) -> AsyncIterator[LogEntry]:
        """The entries with ids in ``[start, end]`` in order (as :meth:`read`), read in
        round trips of one entry first, then twice as many while a read held fewer than
        ``events_per_read`` events (a batch holds up to the trainer's largest read, so a
        fixed count of entries could ask Redis for hundreds of MB in one reply)."""
        count = 1
        while True:
            entries = await self.read(mk, start=start, end=end, count=count,
                                      newest_first=newest_first)
            for entry in entries:
                yield entry
            if len(entries) < count:
                return
            last = f"({entries[-1].entry_id}"
            start, end = (start, last) if newest_first else (last, end)
            if sum(entry.size for entry in entries) < events_per_read:
                count = min(2 * count, MAX_ENTRIES_PER_READ)
