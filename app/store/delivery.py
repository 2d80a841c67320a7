"""Delivery bookkeeping of the trainer group on a model's event stream.

Only the owner of a model's lease gets entries (the lease is checked in the
same Lua step that delivers them).  It first takes over every
unacknowledged entry of the group (its own after a refused publish, a dead
trainer's after a crash) with XCLAIM, oldest first and with their delivery
counts, and reads new entries only when none is pending.  A batch the trainer could
not publish because the model changed under it (a reset, rollback, import or
promotion) is handed back with its delivery counts as they were: that is no
failure of its entries.  Entries delivered too often, or
that cannot be decoded or learned, go to the model's dead-letter stream with
the reason, acknowledged and counted in the same step
(:mod:`app.store.deadletters`).  Applied entries are
acknowledged and trimmed from the stream in one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store.client import lua_source, run_script
from app.store.deadletters import DeadLetterStore
from app.store.decisionlog import LoggedBatch, split_packed
from app.store.failures import FAILURE_FIELDS
from app.store.keys import HANDLED_FIELD, TRAINER_GROUP, ModelKeys
from app.store.noise import NOISE_FIELDS, NoiseRecord, parse_noise
from app.store.snapshots import COUNTER_FIELDS, SnapshotInfo, parse_info

#: Items per entry in ``trainer_read``'s reply: id, delivery count, then the fields below.
_STRIDE = 8
#: The fields of one event as stored on the stream (an entry of one event has just these:
#: ``expire_decision.lua``, ``take_partial.lua``, ``add_examples.lua``, a retried dead
#: letter, and every entry written before feedback batches were packed): kind ("feedback"
#: or "timeout"), event id, context blob, feedback blob.
ENTRY_FIELDS = (b"k", b"e", b"c", b"f")
#: The fields that make an entry a packed batch (``take_feedback.lua``): its events and
#: their lengths; ``e``, ``c`` and ``f`` then hold each column's values back to back.
PACKED_FIELDS = (b"n", b"L")


def unpack_entry(n: bytes, lengths: bytes, columns: Sequence[bytes | None],
                 ) -> list[list[bytes]]:
    """The per-event values of a packed entry's columns (``e``, ``c``, ``f``), one list
    per column; ValueError when the entry is malformed.

    >>> import numpy as np
    >>> L = np.array([2, 2, 1, 3, 1, 1], dtype=">u4").tobytes()
    >>> unpack_entry(b"2", L, [b"e1e2", b"CCCC", b"FG"])
    [[b'e1', b'e2'], [b'C', b'CCC'], [b'F', b'G']]
    """
    count = int(n)
    sizes = np.frombuffer(lengths, dtype=">u4")
    if count < 1 or sizes.size != len(columns) * count or None in columns:
        raise ValueError(f"packed entry of {n!r} events with {sizes.size} lengths")
    rows = sizes.reshape(len(columns), count)
    for column, row in zip(columns, rows, strict=True):
        if int(row.sum()) != len(column or b""):
            raise ValueError("packed entry whose lengths do not add up to its values")
    return [split_packed(column or b"", row) for column, row in zip(columns, rows, strict=True)]


@dataclass(frozen=True)
class Deliveries:
    """A batch of stream entries handed to a trainer, one list per field with one row per
    event (ids ascending).

    A packed entry (a feedback batch: ``n`` events) gives ``n`` rows, each with the entry's
    stream id, delivery count and kind; an entry of one event gives one row.  Acknowledging,
    handing back and claiming go by entry (:attr:`entry_ids`); learning and dead letters by
    row.  Columns rather than one object per event: the trainer's fast path reads a whole
    batch with a few list slices and decodes it with one ``np.frombuffer`` per field
    (per-event objects cost more CPU than the learning itself at d = 64).  A field a row
    lacks is None; an entry deleted from the stream meanwhile lacks all of them.  A packed
    entry whose lengths do not fit its values stays one row, with its stored fields in
    :attr:`malformed` (the row is dead-lettered as it was stored).
    """

    stream_ids: list[str]
    counts: list[int]
    """Times each row's entry was delivered to a consumer, this delivery included."""
    kinds: list[bytes | None]
    event_ids: list[bytes | None]
    contexts: list[bytes | None]
    feedbacks: list[bytes | None]
    malformed: dict[int, tuple[str, dict[bytes, bytes]]] = field(default_factory=dict)
    """Rows of malformed packed entries: the reason and the entry's stored fields."""

    @classmethod
    def from_reply(cls, flat: list[Any]) -> Deliveries:
        """The rows of ``trainer_read``'s flat reply
        ``[source, (id, count, k, e, c, f, n, L) * entries]``.

        >>> d = Deliveries.from_reply([2, b"1-0", 1, b"feedback", b"e1", b"C", b"F", None, None,
        ...                            b"2-0", 3, None, None, None, None, None, None])
        >>> d.stream_ids, d.counts, d.contexts, d.fields(1), d.entry_ids()
        (['1-0', '2-0'], [1, 3], [b'C', None], {}, ['1-0', '2-0'])
        """
        ids, counts, kinds, events, contexts, feedbacks, ns, lengths = (
            flat[1 + i::_STRIDE] for i in range(_STRIDE))
        sids = list(map(bytes.decode, ids))
        counts = list(map(int, counts))
        if not any(ns):  # entries of one event each (as written before batches were packed)
            return cls(sids, counts, kinds, events, contexts, feedbacks)
        out = cls([], [], [], [], [], [])
        for j, n in enumerate(ns):
            columns = (events[j], contexts[j], feedbacks[j])
            if not n:
                out._add(sids[j], counts[j], kinds[j], [[value] for value in columns])
                continue
            try:
                values = unpack_entry(n, lengths[j] or b"", columns)
            except ValueError as exc:
                stored = dict(zip(ENTRY_FIELDS + PACKED_FIELDS,
                                  (kinds[j], *columns, n, lengths[j]), strict=True))
                out.malformed[len(out.stream_ids)] = (
                    f"malformed entry: {exc!r}",
                    {name: v for name, v in stored.items() if v is not None})
                out._add(sids[j], counts[j], kinds[j], [[None]] * 3)
                continue
            out._add(sids[j], counts[j], kinds[j], values)
        return out

    def _add(self, sid: str, count: int, kind: bytes | None, values: list[list[Any]]) -> None:
        """Append one entry's rows (``values``: its event ids, contexts, feedbacks)."""
        rows = len(values[0])
        self.stream_ids.extend([sid] * rows)
        self.counts.extend([count] * rows)
        self.kinds.extend([kind] * rows)
        for column, value in zip((self.event_ids, self.contexts, self.feedbacks), values,
                                 strict=True):
            column.extend(value)

    def __len__(self) -> int:
        return len(self.stream_ids)

    def entry_ids(self, rows: Sequence[int] | None = None) -> list[str]:
        """The distinct stream ids of ``rows`` (default: every row), in order."""
        ids = self.stream_ids if rows is None else [self.stream_ids[i] for i in rows]
        return list(dict.fromkeys(ids))

    def entry_rows(self) -> dict[str, list[int]]:
        """Each entry's rows, by stream id."""
        out: dict[str, list[int]] = {}
        for i, sid in enumerate(self.stream_ids):
            out.setdefault(sid, []).append(i)
        return out

    def entry_spans(self, spans: Sequence[range]) -> list[range]:
        """Consecutive ``spans`` of rows, each moved to end where an entry ends (a packed
        entry is never cut: a span passes its size by less than one entry; a span swallowed
        by the one before goes).

        >>> d = Deliveries(["1-0", "2-0", "2-0", "3-0"], [1] * 4, [b"k"] * 4, [b"e"] * 4,
        ...                [b"c"] * 4, [b"f"] * 4)
        >>> d.entry_spans([range(0, 2), range(2, 4)]), d.entry_spans([range(0, 1), range(1, 4)])
        ([range(0, 3), range(3, 4)], [range(0, 1), range(1, 4)])
        """
        out: list[range] = []
        start = 0
        for span in spans:
            stop = span.stop
            while 0 < stop < len(self) and self.stream_ids[stop] == self.stream_ids[stop - 1]:
                stop += 1
            if stop > start:
                out.append(range(start, stop))
                start = stop
        return out

    def part(self, rows: range) -> Deliveries:
        """The rows ``rows`` (whole entries) as a batch of their own."""
        cut = slice(rows.start, rows.stop)
        return Deliveries(self.stream_ids[cut], self.counts[cut], self.kinds[cut],
                          self.event_ids[cut], self.contexts[cut], self.feedbacks[cut],
                          {i - rows.start: bad for i, bad in self.malformed.items()
                           if i in rows})

    def logged(self, positions: Sequence[int]) -> LoggedBatch:
        """The rows at ``positions`` packed for the decision log (their stored fields)."""
        columns: tuple[list[Any], ...] = (self.stream_ids, self.kinds, self.event_ids,
                                          self.contexts, self.feedbacks)
        if positions and positions[-1] - positions[0] + 1 == len(positions):  # the usual case
            rows = slice(positions[0], positions[-1] + 1)
            return LoggedBatch.pack([column[rows] for column in columns])
        return LoggedBatch.pack([[column[i] for i in positions] for column in columns])

    def packed(self, rows: Sequence[int]) -> dict[bytes, bytes | int]:
        """The fields of one packed entry holding ``rows`` (of one kind, in order), as
        ``take_feedback.lua`` writes them."""
        batch = LoggedBatch.pack([[column[i] for i in rows]  # type: ignore[misc]
                                  for column in (self.event_ids, self.contexts, self.feedbacks)])
        kind = self.kinds[rows[0]] or b""
        return {b"k": kind, b"n": batch.n, b"L": batch.lengths,
                **dict(zip(ENTRY_FIELDS[1:], batch.columns, strict=True))}

    def fields(self, i: int) -> dict[bytes, bytes]:
        """Row ``i``'s fields as an entry of one event (those it has), e.g. for its dead
        letter; a malformed packed entry's as stored."""
        if i in self.malformed:
            return self.malformed[i][1]
        values = (self.kinds[i], self.event_ids[i], self.contexts[i], self.feedbacks[i])
        return {name: v for name, v in zip(ENTRY_FIELDS, values, strict=True) if v is not None}


@dataclass(frozen=True)
class TrainerView:
    """What the trainer needs of a model before a batch: config, counters, noise rates."""

    config: ModelConfig
    info: SnapshotInfo
    noise: NoiseRecord | None


def _deliveries(reply: Any) -> Deliveries | None:
    """``trainer_read``'s reply as a batch (None: the reader does not hold the lease)."""
    return None if int(reply[0]) == 0 else Deliveries.from_reply(reply)


class DeliveryStore:
    """Lease-checked reads, dead letters and acknowledgements of the trainer group."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._read = redis.register_script(lua_source("trainer_read"))
        self._unread = redis.register_script(lua_source("trainer_unread"))
        self._dead = DeadLetterStore(redis)

    async def read_batch(self, mk: ModelKeys, consumer: str, count: int) -> Deliveries | None:
        """About ``count`` events for the lease owner ``consumer``; None without the lease.

        A packed entry is taken whole, so a read passes ``count`` by less than one entry.

        Pending entries of any consumer (its own after a refused publish, a
        dead trainer's after a crash) come first, oldest first, taken over
        with their delivery counts; new entries are read only when nothing is
        pending, so the ids ascend.  An entry deleted from the stream meanwhile
        comes back without fields (acknowledge it, there is nothing to apply).
        """
        reply: Any = await self._read(keys=[mk.lease, mk.events],
                                      args=[consumer, TRAINER_GROUP, int(count)])
        return _deliveries(reply)

    async def read_batches(self, reads: Sequence[tuple[ModelKeys, int, bool]], consumer: str
                           ) -> list[Deliveries | Exception | None]:
        """:meth:`read_batch` of several models (``(model, count, sleep)``) in one round
        trip; a read that failed gives its exception (the others are unaffected).  ``sleep``:
        a read that finds nothing sets the model's :attr:`~app.store.keys.ModelKeys.asleep`
        flag in the same step (a step that adds an entry then wakes the trainer)."""
        if not reads:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk, count, sleep in reads:
                await run_script(self._read, [mk.lease, mk.events, mk.asleep],
                                 [consumer, TRAINER_GROUP, int(count), int(sleep)], pipe)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        return [reply if isinstance(reply, Exception) else _deliveries(reply)
                for reply in replies]

    async def unread(self, mk: ModelKeys, consumer: str, batch: Deliveries) -> bool:
        """Hand ``batch`` back undelivered: its entries still pending (not acknowledged nor
        dead-lettered) get the delivery counts they had before this read, and stay with the
        lease owner ``consumer``; False (nothing done) without the lease."""
        args: list[str | int] = [consumer, TRAINER_GROUP]
        counts = dict(zip(batch.stream_ids, batch.counts, strict=True))
        for sid, count in counts.items():
            args += [sid, count - 1]
        return bool(int(await self._unread(keys=[mk.lease, mk.events], args=args)))

    async def read_model(self, mk: ModelKeys) -> TrainerView | None:
        """Config, snapshot counters and noise record in one round trip (None: model gone),
        read in one transaction: a promotion or rollback changes config and version in one
        step, so the trainer never sees one from before it and one from after."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(mk.meta, "config")
            pipe.hmget(mk.snapshot, list(COUNTER_FIELDS))
            pipe.hmget(mk.noise, list(NOISE_FIELDS))
            config, counters, noise = await pipe.execute()
        info = parse_info(counters)
        if config is None or info is None:
            return None
        parsed = ModelConfig.from_json(config)
        return TrainerView(parsed, info, parse_noise(noise, parsed))

    async def dead_letter(self, mk: ModelKeys, batch: Deliveries,
                          items: Sequence[tuple[int, str]],
                          splits: Sequence[Sequence[int]] = ()) -> int:
        """Move rows (``(index in batch, reason)``) to the dead letters, each as an entry of
        one event, their entries acknowledged and counted in one step (an entry's rows are
        all given, or none: acknowledged, the entry is gone); returns how many were moved.
        ``splits``: the other rows of each entry that has rows in ``items`` and others
        (one list per entry), put back on the stream as a new packed entry in the same step
        (learned in a later read)."""
        return await self._dead.move(
            mk, [(batch.stream_ids[i], batch.counts[i], reason, batch.fields(i))
                 for i, reason in items],
            [(batch.stream_ids[rows[0]], batch.packed(rows)) for rows in splits])

    async def ack_and_trim(self, mk: ModelKeys, stream_ids: Sequence[str],
                           applied_up_to: str | None, handled: bool = False,
                           succeeded: bool = False) -> None:
        """Acknowledge ``stream_ids`` and drop the stream entries older than ``applied_up_to``
        (``handled``: and record it as handled, :meth:`EventStore.handled_id`, which a sync
        waits for; ``succeeded``: the step went through, so its failure record is removed
        first: a sync that sees the batch handled sees the failure gone).

        Trimming is safe because the lease owner reads new entries only when
        nothing older is pending: every entry below ``applied_up_to`` is applied
        or dead-lettered.
        """
        async with self.redis.pipeline(transaction=False) as pipe:
            if stream_ids:
                pipe.xack(mk.events, TRAINER_GROUP, *stream_ids)
            if applied_up_to is not None:
                pipe.xtrim(mk.events, minid=applied_up_to, approximate=False)
                if succeeded:
                    pipe.hdel(mk.stats, *FAILURE_FIELDS)
                if handled:
                    pipe.hset(mk.stats, HANDLED_FIELD, applied_up_to)
            await pipe.execute()
