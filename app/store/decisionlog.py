"""A model's decision log: every applied event, kept for counterfactual evaluation.

The trainer trims applied entries from the event stream, so the log keeps a
copy of each one on its own stream (``nl:{T:M}:log``).  The copy is written
by the same Lua step that publishes the snapshot the event went into
(``publish_snapshot.lua``), so an event is logged exactly when it changed
the model: never twice across a crash between the publish and the
acknowledgement, never lost.  Dead-lettered entries are not applied and
not logged.

An event entry holds the event stream's fields ``k`` (``feedback`` or
``timeout``), ``e`` (event id), ``c`` (decision context blob), ``f``
(feedback blob), plus ``s`` (its id on the event stream: when the feedback
was joined) and ``v`` (the model version it was published in).  Its own
entry id is the time it was applied (Redis clock, ms).  A marker entry
(:meth:`DecisionLogStore.append_marker`) records what happened to the model
(``k`` = ``marker``, ``m`` its type such as ``rollback`` or ``promote``,
``d`` its detail as JSON), its entry id being its time.

Retention (:class:`LogRetention`) trims approximately (``MAXLEN ~`` on each
append, ``MINID ~`` by age on each publish): whole stream nodes go at once,
so a few more entries than the limits may stay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store.keys import ModelKeys
from app.store.util import text

#: Events kept per model by default (the newest).
DEFAULT_MAX_EVENTS = 1_000_000
#: Seconds an entry is kept by default (7 days).
DEFAULT_MAX_AGE_SECONDS = 7 * 86_400
#: ``k`` of a marker entry.
MARKER_KIND = "marker"


@dataclass(frozen=True)
class LogRetention:
    """How much of a model's decision log is kept: ``max_events`` entries (0 turns the log
    off) no older than ``max_age_seconds`` (0: no age limit)."""

    max_events: int = DEFAULT_MAX_EVENTS
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS

    @property
    def enabled(self) -> bool:
        return self.max_events > 0

    def min_id(self, now: float | None = None) -> str:
        """Oldest entry id kept by age (``"0"``: no age limit)."""
        if self.max_age_seconds <= 0:
            return "0"
        now = time.time() if now is None else now
        return str(max(0, int((now - self.max_age_seconds) * 1000)))


@dataclass(frozen=True)
class LogEntry:
    """One stored log entry: its id and fields as stored (bytes)."""

    entry_id: str
    fields: dict[bytes, bytes]

    @property
    def is_marker(self) -> bool:
        return self.fields.get(b"k") == MARKER_KIND.encode()

    @property
    def applied_ms(self) -> int:
        """Time the entry was written (ms since the epoch)."""
        return int(self.entry_id.partition("-")[0])


class DecisionLogStore:
    """Read a model's decision log and append markers to it (events are appended by
    :meth:`~app.store.snapshots.SnapshotStore.publish`)."""

    def __init__(self, redis: aioredis.Redis,
                 retention: LogRetention | None = None) -> None:
        self.redis = redis
        self.retention = retention or LogRetention()

    async def append_marker(self, mk: ModelKeys, kind: str, detail: dict[str, Any]) -> str:
        """Add a marker (``kind`` such as ``rollback``, ``promote``, ``reset``, ``detail``
        any JSON object) to the log; returns its entry id.  Nothing is written (and ``""``
        returned) while the log is off."""
        if not self.retention.enabled:
            return ""
        entry_id = await self.redis.xadd(
            mk.log, {"k": MARKER_KIND, "m": kind, "d": orjson.dumps(detail)},
            maxlen=self.retention.max_events, approximate=True)
        return text(entry_id) or ""

    async def read(self, mk: ModelKeys, *, start: str = "-", end: str = "+",
                   count: int = 1000) -> list[LogEntry]:
        """Up to ``count`` entries with ids in ``[start, end]`` (``(id`` excludes), oldest
        first."""
        reply: Any = await self.redis.xrange(mk.log, min=start, max=end, count=count)
        return [LogEntry(text(entry_id) or "0-0", fields) for entry_id, fields in reply]

    async def length(self, mk: ModelKeys) -> int:
        """Entries held now (events and markers)."""
        return int(await self.redis.xlen(mk.log))

    async def memory(self, mk: ModelKeys) -> int | None:
        """Bytes the log takes in Redis (``MEMORY USAGE`` sampling every node), None without
        a log."""
        used: Any = await self.redis.memory_usage(mk.log, samples=0)
        return None if used is None else int(used)
