"""A model's dead letters: the stream entries the trainer could not apply.

The trainer moves an entry it cannot apply (undecodable, refused by the
learner, delivered too often) to the model's dead-letter stream with the
reason, acknowledges it and counts it in the model's stats, in one Lua step
(:meth:`DeadLetterStore.move`).  A dead letter stays until its owner drops it
(:meth:`DeadLetterStore.drop`) or retries it (:meth:`DeadLetterStore.retry`:
back on the event stream as a new entry, so the trainer applies it, or moves
it back with the new reason).  The stats hash holds two counters, each
changed in the same step as the stream:

- ``events_dead_lettered``: dead letters held now (moved in, minus dropped
  and retried); it always equals the length of the dead-letter stream;
- ``dead_letters_dropped``: dead letters removed without being applied
  (dropped by the owner, or the oldest beyond :data:`DEAD_LETTER_MAXLEN`).

A page of dead letters (:meth:`DeadLetterStore.page`) is read a few entries at
a time (each holds the event's stored context, up to the largest context a
model may log) and holds at most ``limit`` of them and
:data:`~app.store.paging.MAX_PAGE_BYTES` of their JSON.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.store import codec
from app.store.client import lua_source
from app.store.keys import TRAINER_GROUP, ModelKeys
from app.store.paging import take_page
from app.store.util import parse_stream_id, text

#: Dead letters kept per model; beyond it the oldest are dropped (and counted as dropped).
DEAD_LETTER_MAXLEN = 10_000
#: Fields of a model's stats hash that count its dead letters (see the module docstring).
HELD_FIELD = "events_dead_lettered"
DROPPED_FIELD = "dead_letters_dropped"
#: Largest feedback array (in elements) shown in a listed dead letter.
MAX_SHOWN_ELEMENTS = 64
#: :meth:`DeadLetterStore.scan`: entries per read, doubled from 1 while a read held fewer
#: bytes than :data:`READ_BYTES`, up to :data:`MAX_ENTRIES_PER_READ`.
READ_BYTES = 1024 * 1024
MAX_ENTRIES_PER_READ = 256


class ModelGone(Exception):
    """The model's event stream no longer exists (the model was deleted)."""


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter as listed: where it was, what it held, why and when it failed."""

    entry_id: str
    """Id in the dead-letter stream (what drop and retry take)."""
    stream_id: str
    """Id the event had on the model's event stream."""
    event_id: str | None
    kind: str | None
    """``feedback`` (joined feedback) or ``timeout`` (a decision that expired)."""
    reason: str
    deliveries: int
    dead_lettered_at: str
    """UTC time of the move (ISO 8601, from the entry id)."""
    fields: dict[str, list[int]] | None
    """Shape of each decoded field (context and feedback); None when undecodable."""
    feedback: dict[str, Any] | None
    """The feedback's arrays of at most :data:`MAX_SHOWN_ELEMENTS` elements, as JSON values;
    None when undecodable."""


@dataclass(frozen=True)
class DeadLetterPage:
    """A page of dead letters, oldest first."""

    items: list[DeadLetter]
    total: int
    """Dead letters held now."""
    next_after: str | None
    """Entry id to pass as ``after`` for the next page (None: this is the last)."""


def _decoded(blob: bytes | None) -> dict[str, np.ndarray | codec.SparseArray] | None:
    """The blob's arrays, those stored sparse kept sparse (a wide context is not expanded
    to list its shapes)."""
    if blob is None:
        return None
    try:
        return codec.decode_stored(blob)
    except (codec.CodecError, ValueError):
        return None


def json_value(arr: np.ndarray) -> Any:
    """An array as a JSON value; non-finite numbers become None (JSON has none)."""
    finite = np.isfinite(arr) if arr.dtype.kind == "f" else None
    if finite is None or finite.all():
        return arr.tolist()
    values = arr.astype(object)
    values[~finite] = None
    return values.tolist()


def parse_dead_letter(entry_id: bytes | str, fields: dict[bytes, bytes]) -> DeadLetter:
    """A :class:`DeadLetter` from one dead-letter stream entry."""
    sid = text(entry_id) or "0-0"
    context, feedback = _decoded(fields.get(b"c")), _decoded(fields.get(b"f"))
    shapes = None if context is None or feedback is None else {
        name: list(arr.shape) for name, arr in {**context, **feedback}.items()}
    shown = None if feedback is None else {
        name: json_value(arr) for name, arr in feedback.items()
        if isinstance(arr, np.ndarray) and arr.size <= MAX_SHOWN_ELEMENTS}
    at = datetime.fromtimestamp(parse_stream_id(sid)[0] / 1000.0, UTC)
    return DeadLetter(entry_id=sid, stream_id=text(fields.get(b"stream_id")) or "",
                      event_id=text(fields.get(b"e")), kind=text(fields.get(b"k")),
                      reason=text(fields.get(b"reason")) or "",
                      deliveries=int(fields.get(b"deliveries") or 0),
                      dead_lettered_at=at.isoformat(timespec="milliseconds"),
                      fields=shapes, feedback=shown)


class DeadLetterStore:
    """Move, list, drop and retry the dead letters of a model."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._move = redis.register_script(lua_source("dead_letter_move"))
        self._drop = redis.register_script(lua_source("dead_letter_drop"))
        self._retry = redis.register_script(lua_source("dead_letter_retry"))

    async def move(self, mk: ModelKeys, entries: Sequence[tuple[str, int, str,
                                                                dict[bytes, bytes]]],
                   splits: Sequence[tuple[str, Mapping[bytes, bytes | int]]] = ()) -> int:
        """Move ``(stream id, delivery count, reason, stored fields k/e/c/f)`` events of the
        event stream to the dead letters (their entries acknowledged and counted in the same
        step); returns how many were moved (an entry no longer pending, or a deleted model's,
        is not).  Several events may share a stream id (rows of one packed entry): it is
        acknowledged once.  ``splits``: ``(stream id, fields)``, an entry whose other events
        go back on the stream, as a new entry of these fields, in the same step (when this
        step acknowledges it)."""
        if not entries and not splits:
            return 0
        args: list[bytes | str | int] = [TRAINER_GROUP, DEAD_LETTER_MAXLEN, len(entries)]
        for stream_id, deliveries, reason, fields in entries:
            args += [stream_id, deliveries, reason, len(fields)]
            for name, value in fields.items():
                args += [name, value]
        args.append(len(splits))
        for stream_id, new in splits:
            args += [stream_id, len(new)]
            for key, item in new.items():
                args += [key, item]
        moved: Any = await self._move(
            keys=[mk.events, mk.dead_letter, mk.stats, mk.meta, mk.asleep], args=args)
        return int(moved)

    async def held(self, mk: ModelKeys) -> int:
        """Dead letters held now (the stats counter)."""
        return int(await self.redis.hget(mk.stats, HELD_FIELD) or 0)

    async def scan(self, mk: ModelKeys, after: str | None = None
                   ) -> AsyncGenerator[DeadLetter, None]:
        """The dead letters after the entry id ``after``, oldest first, read one entry first,
        then twice as many while a read held fewer than :data:`READ_BYTES`."""
        low, count = f"({after}" if after else "-", 1
        while True:
            reply: Any = await self.redis.xrange(mk.dead_letter, min=low, max="+", count=count)
            for entry_id, fields in reply:
                yield parse_dead_letter(entry_id, fields)
            if len(reply) < count:
                return
            low = f"({text(reply[-1][0])}"
            if sum(len(v) for _, fields in reply for v in fields.values()) < READ_BYTES:
                count = min(2 * count, MAX_ENTRIES_PER_READ)

    async def page(self, mk: ModelKeys, limit: int, after: str | None = None,
                   max_bytes: int | None = None) -> DeadLetterPage:
        """Up to ``limit`` dead letters, oldest first, after the entry id ``after``, at most
        ``max_bytes`` of them as JSON (:func:`~app.store.paging.take_page`)."""
        items, more = await take_page(self.scan(mk, after), limit, max_bytes)
        total = int(await self.redis.xlen(mk.dead_letter))
        return DeadLetterPage(items, total, items[-1].entry_id if more and items else None)

    async def drop(self, mk: ModelKeys, entry_id: str | None = None) -> int:
        """Drop the dead letter ``entry_id`` (or every one when None); returns how many."""
        n: Any = await self._drop(keys=[mk.dead_letter, mk.stats], args=[entry_id or ""])
        return int(n)

    async def retry(self, mk: ModelKeys, entry_id: str) -> str | None:
        """Put the dead letter ``entry_id`` back on the event stream; returns its new stream
        id, or None when there is no such dead letter.  Raises :class:`ModelGone` when the
        event stream is gone."""
        reply = text(await self._retry(keys=[mk.dead_letter, mk.events, mk.stats, mk.asleep],
                                       args=[entry_id]))
        if reply == "-":
            raise ModelGone(mk.model)
        return reply or None
