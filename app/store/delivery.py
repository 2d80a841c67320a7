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
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store.client import lua_source, run_script
from app.store.deadletters import DeadLetterStore
from app.store.decisionlog import LoggedBatch
from app.store.failures import FAILURE_FIELDS
from app.store.keys import HANDLED_FIELD, TRAINER_GROUP, ModelKeys
from app.store.noise import NOISE_FIELDS, NoiseRecord, parse_noise
from app.store.snapshots import COUNTER_FIELDS, SnapshotInfo, parse_info

#: Items per entry in ``trainer_read``'s reply: id, delivery count, then the fields below.
_STRIDE = 6
#: The fields every stream entry is written with (``take_feedback.lua`` and its siblings):
#: kind ("feedback" or "timeout"), event id, context blob, feedback blob.
ENTRY_FIELDS = (b"k", b"e", b"c", b"f")


@dataclass(frozen=True)
class Deliveries:
    """A batch of stream entries handed to a trainer, one list per field (ids ascending).

    Columns rather than one object per entry: the trainer's fast path reads
    a whole batch with a few list slices and decodes it with one
    ``np.frombuffer`` per field (per-entry objects cost more CPU than the
    learning itself at d = 64).  A field an entry lacks is None; an entry
    deleted from the stream meanwhile lacks all of them.
    """

    stream_ids: list[str]
    counts: list[int]
    """Times each entry was delivered to a consumer, this delivery included."""
    kinds: list[bytes | None]
    event_ids: list[bytes | None]
    contexts: list[bytes | None]
    feedbacks: list[bytes | None]

    @classmethod
    def from_reply(cls, flat: list[Any]) -> Deliveries:
        """The entries of ``trainer_read``'s flat reply ``[source, (id, count, k, e, c, f) * n]``.

        >>> d = Deliveries.from_reply([2, b"1-0", 1, b"feedback", b"e1", b"C", b"F",
        ...                            b"2-0", 3, None, None, None, None])
        >>> d.stream_ids, d.counts, d.contexts, d.fields(1)
        (['1-0', '2-0'], [1, 3], [b'C', None], {})
        """
        ids, counts, kinds, events, contexts, feedbacks = (
            flat[1 + i::_STRIDE] for i in range(_STRIDE))
        return cls(list(map(bytes.decode, ids)), list(map(int, counts)), kinds, events,
                   contexts, feedbacks)

    def __len__(self) -> int:
        return len(self.stream_ids)

    def logged(self, positions: Sequence[int]) -> LoggedBatch:
        """The entries at ``positions`` packed for the decision log (their stored fields)."""
        columns: tuple[list[Any], ...] = (self.stream_ids, self.kinds, self.event_ids,
                                          self.contexts, self.feedbacks)
        if positions and positions[-1] - positions[0] + 1 == len(positions):  # the usual case
            rows = slice(positions[0], positions[-1] + 1)
            return LoggedBatch.pack([column[rows] for column in columns])
        return LoggedBatch.pack([[column[i] for i in positions] for column in columns])

    def fields(self, i: int) -> dict[bytes, bytes]:
        """Entry ``i``'s fields as stored (those it has), e.g. for its dead letter."""
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
        """Up to ``count`` entries for the lease owner ``consumer``; None without the lease.

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
        for sid, count in zip(batch.stream_ids, batch.counts, strict=True):
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
                          items: Sequence[tuple[int, str]]) -> int:
        """Move entries (``(index in batch, reason)``) to the dead letters, acknowledged and
        counted in one step; returns how many were moved."""
        return await self._dead.move(mk, [(batch.stream_ids[i], batch.counts[i], reason,
                                           batch.fields(i)) for i, reason in items])

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
