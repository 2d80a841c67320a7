"""Decision contexts, the exactly-once feedback join and the per-model event stream.

Life of one event:

1. :meth:`EventStore.record_decisions` logs each decision's context under
   its event id with a TTL and adds the id to the model's pending set with
   its deadline, and the id to the model's event index (how a model delete finds its
   per-event keys without a scan), in one Lua step for a whole batch of decisions.
2. :meth:`EventStore.take_feedback_many` (one Lua call per batch) takes each
   context exactly once, leaves a tombstone (so a second feedback gets
   "duplicate"), removes the pending entry and appends the joined event to
   the model's stream.  Or
   :meth:`EventStore.expire_many` (the sweeper) ends it after its
   deadline: a default event on the stream (``no_click``) or nothing
   (``drop``).  Both remove the pending entry, so only one of them wins.
3. The trainer reads the stream with the consumer group
   (:class:`~app.store.delivery.DeliveryStore`), applies, publishes and
   then acknowledges.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.store import codec, keys
from app.store.client import ScriptBatch, Scripts
from app.store.decisionlog import MAX_ITEM_IDS
from app.store.dueset import DueSet
from app.store.keys import HANDLED_FIELD, TRAINER_GROUP, ModelKeys, api_key
from app.store.models import ModelStamp
from app.store.tenants import KeyRecord
from app.store.util import text

#: Value left in place of a context once its feedback was accepted.
TOMBSTONE = b"\x00taken"


#: Random bytes of an event id: 144 bits, a multiple of 3 bytes, so that the ids of a batch
#: are slices of one URL-safe base64 string (24 characters each, no padding).
EVENT_ID_BYTES = 18


def new_event_ids(n: int) -> list[str]:
    """``n`` unguessable event ids (144 random bits each, URL-safe), made in one call.

    >>> ids = new_event_ids(3)
    >>> len(set(ids)), [len(i) for i in ids]
    (3, [24, 24, 24])
    """
    size = 4 * EVENT_ID_BYTES // 3
    text = base64.urlsafe_b64encode(secrets.token_bytes(EVENT_ID_BYTES * n)).decode("ascii")
    return [text[i:i + size] for i in range(0, size * n, size)]


def new_event_id() -> str:
    """One unguessable event id (see :func:`new_event_ids`)."""
    return new_event_ids(1)[0]


@dataclass(frozen=True)
class DecisionGuard:
    """The API key record and model state a decision was made with (all cached in the API).

    A guarded :meth:`EventStore.record_decisions` logs the decision only if
    Redis still holds exactly these: the key's hash and tenant (so a revoked
    key stops at once), and the model's config, snapshot version and noise
    rates, source, estimator and withdrawal.  The key record carries its own hash tag, so a
    guarded step needs a single Redis; a Redis Cluster would refuse it (cross-slot).
    """

    key: KeyRecord
    model: ModelStamp


class HoldLimitReached(Exception):
    """Logging the decisions would pass what the model may hold: ``limit`` names the bound
    (``"pending"``: decisions awaiting feedback, ``"context_bytes"``: one stored context),
    ``held`` what is held or asked. Nothing was written."""

    def __init__(self, limit: str, held: int, most: int) -> None:
        super().__init__(f"{limit}: {held} (most {most})")
        self.limit = limit
        self.held = held
        self.most = most


@dataclass(frozen=True)
class FeedbackOutcome:
    """Result of one feedback join: ``status`` is "ok", "unknown", "duplicate" or
    "not_activated" (a deferred decision not activated yet; a step of
    an open decision may also give "open" or "conflict", see :mod:`app.store.openfeedback`)."""

    status: str
    stream_id: str | None = None


def feedback_outcomes(reply: Any) -> list[FeedbackOutcome]:
    """The outcomes of a feedback script's flat reply ``{status_1, stream id_1 or '', ...}``."""
    return [FeedbackOutcome(status.decode(), sid.decode() or None)
            for status, sid in zip(reply[::2], reply[1::2], strict=True)]


def decode_entry(context: bytes | None, feedback: bytes | None) -> dict[str, np.ndarray]:
    """One stream entry's fields: its context joined with its feedback.

    Raises :class:`~app.store.codec.CodecError` when a blob is missing or malformed.
    """
    if context is None or feedback is None:
        raise codec.CodecError("entry without a context or a feedback blob")
    return {**codec.decode(context), **codec.decode(feedback)}


def decode_entries(contexts: Sequence[bytes | None], feedbacks: Sequence[bytes | None],
                   ) -> dict[str, np.ndarray] | None:
    """The columnar batch of many entries' fields (each field stacked on axis 0), at once.

    When every context blob shares one layout and every feedback blob
    another (the usual case: one model, fixed-size fields), each field is
    read for the whole batch with one ``np.frombuffer``
    (:func:`~app.store.codec.decode_columns`); the columns equal what
    :func:`~app.learners.base.stack_events` builds from each entry's
    :func:`decode_entry`.  Returns None when the layouts differ or an entry
    is malformed: decode one entry at a time then (and find the culprit).
    """
    if None in contexts or None in feedbacks:
        return None
    try:
        ctx = codec.decode_columns(contexts)  # type: ignore[arg-type]  # no None (checked)
        fb = codec.decode_columns(feedbacks)  # type: ignore[arg-type]
    except codec.CodecError:
        return None
    if ctx is None or fb is None:
        return None
    return {**ctx, **fb}


class EventStore:
    """Decisions, feedback and the event stream of each model."""

    def __init__(self, redis: aioredis.Redis, scripts: Scripts, *,
                 batch_decisions: bool = False) -> None:
        self.redis = redis
        self.scripts = scripts
        self.sweep_due = DueSet(redis, keys.SWEEP_DUE)
        #: Decision logs of concurrent predicts, pipelined per loop turn (single Redis only).
        self._decision_batch = ScriptBatch(scripts["record_decisions"]) if batch_decisions \
            else None

    async def record_decisions(self, mk: ModelKeys,
                               contexts: Sequence[tuple[str, Mapping[str, np.ndarray]]],
                               wait_seconds: int, grace_seconds: int, *,
                               predictions: int | None = None,
                               guard: DecisionGuard | None = None, defer: bool = False,
                               apprentice: Sequence[bool] | None = None,
                               agreement: tuple[int, int] | None = None,
                               item_ids: Mapping[int, str] | None = None,
                               max_pending: int = 0,
                               max_context_bytes: int = 0) -> int | None:
        """Log ``(event_id, context)`` pairs awaiting feedback; return their deadline.

        Counts ``predictions`` decisions (default: one per context; decisions
        made with ``explore: false`` are counted, not logged).  With
        ``defer``, the contexts are logged without a deadline: no feedback is
        taken and no default made until :meth:`activate`; never activated,
        they expire unlearned after ``wait_seconds + grace_seconds``.
        ``apprentice``: one flag per context of a model in apprentice mode,
        whether the model's own choice agreed with the baseline served, kept
        beside the context for the feedback (:meth:`take_feedback_many` with
        ``rewards``); ``agreement``: the apprentice decisions to count and how
        many of them agreed (default: those of ``apprentice``; decisions made
        with ``explore: false`` are counted, not logged).  With a ``guard``,
        nothing is written and None is returned unless the API key and the
        model are still those of the guard (one Lua step; a single Redis only,
        see :class:`DecisionGuard`).  On a single Redis, the logs of concurrent
        predicts go to Redis together (:class:`ScriptBatch`).  ``item_ids``: the candidate
        ids a ranking showed by their 64-bit hash, added in the same step to the model's id
        table unless known (at most :data:`~app.store.decisionlog.MAX_ITEM_IDS`).
        ``max_pending`` (0: none): most decisions the model may hold awaiting feedback,
        pending and deferred, checked in the same step; ``max_context_bytes`` (0: none):
        the largest stored context. Past either, :class:`HoldLimitReached` is raised and
        nothing is written.
        """
        flags = list(apprentice or ())
        if flags and len(flags) != len(contexts):
            raise ValueError("one apprentice flag per context")
        decided, agreed = agreement if agreement is not None else (len(flags), sum(flags))
        keys_ = [mk.stats, mk.pending, mk.deferred, mk.event_index,
                 *(mk.context(eid) for eid, _ in contexts),
                 *(mk.apprentice(eid) for eid, _ in contexts if flags), mk.item_ids]
        args: list[bytes | str | int | float] = [
            int(wait_seconds), int(grace_seconds),
            len(contexts) if predictions is None else int(predictions), len(contexts),
            int(defer), int(decided), int(agreed), len(flags), int(max_pending)]
        blobs = codec.encode_many([ctx for _, ctx in contexts])
        largest = max(map(len, blobs), default=0)
        if max_context_bytes and largest > max_context_bytes:
            raise HoldLimitReached("context_bytes", largest, max_context_bytes)
        for (eid, _), blob in zip(contexts, blobs, strict=True):
            args += [eid, blob]
        args += [int(f) for f in flags]
        if guard is not None:
            stamp = guard.model
            keys_ += [api_key(guard.key.key_id), mk.meta, mk.snapshot, mk.noise]
            args += [guard.key.hash, guard.key.tenant, stamp.config_sha1, stamp.version,
                     stamp.rho0, stamp.rho1, stamp.noise_source, stamp.estimator,
                     stamp.withdrawn]
        if item_ids:
            args += [MAX_ITEM_IDS, len(item_ids)]
            for item_hash, item_id in item_ids.items():
                args += [item_hash, item_id]
        reply: Any = await (self._decision_batch.run(keys_, args) if self._decision_batch
                            else self.scripts.run("record_decisions", keys_, args))
        if reply is None:
            return None
        deadline, first = int(reply[0]), int(reply[1])
        if deadline < 0:
            raise HoldLimitReached("pending", first, max_pending)
        if first:
            await self.sweep_due.lower(mk, deadline + 1)
        return deadline

    async def activate(self, mk: ModelKeys, event_id: str, wait_seconds: int,
                       grace_seconds: int) -> int | str:
        """Give a deferred decision its deadline, ``wait_seconds`` from now: that deadline
        (Redis clock seconds), or "unknown" (never issued, expired, another model's) or
        "active" (not deferred, or activated already)."""
        reply: Any = await self.scripts.run(
            "activate_decision", [mk.context(event_id), mk.pending, mk.apprentice(event_id),
                                  mk.deferred, mk.event_index],
            [event_id, int(wait_seconds), int(grace_seconds), TOMBSTONE])
        status = text(reply[0]) or "unknown"
        if status != "ok":
            return status
        if int(reply[2]):
            await self.sweep_due.lower(mk, int(reply[1]) + 1)
        return int(reply[1])

    async def deferred(self, mk: ModelKeys, event_id: str) -> bool:
        """Whether a decision made with ``defer`` is still waiting for its activation."""
        return await self.redis.zscore(mk.deferred, event_id) is not None

    async def take_feedback_many(self, mk: ModelKeys,
                                 items: Sequence[tuple[str, Mapping[str, np.ndarray]]],
                                 rewards: Sequence[float] | None = None,
                                 per_entry: int = 0) -> list[FeedbackOutcome]:
        """Join each ``(event_id, feedback fields)`` exactly once (one Lua call, in order).

        The joined events go on the model's stream as one packed entry, or entries of at
        most ``per_entry`` events (0: one entry; a wide model's entries are as many rows as
        the trainer may hold dense at once: it never cuts an entry).  ``rewards`` (one
        observed reward per item, for a model that logged apprentice decisions): each
        joined apprentice decision adds its reward to the model's apprentice counters in
        the same step.
        """
        if not items:
            return []
        given = list(rewards or ())
        keys_ = [mk.pending, mk.events, mk.stats, mk.asleep,
                 *(mk.context(eid) for eid, _ in items),
                 *(mk.apprentice(eid) for eid, _ in items if given),
                 *(mk.partial(eid) for eid, _ in items)]
        args: list[bytes | str | int | float] = [TOMBSTONE, len(items) if given else 0]
        blobs = codec.encode_many([feedback for _, feedback in items])
        for (eid, _), blob in zip(items, blobs, strict=True):
            args += [eid, blob]
        args += [repr(float(r)) for r in given]
        args.append(int(per_entry))
        return feedback_outcomes(await self.scripts.run("take_feedback", keys_, args))

    async def take_feedback(self, mk: ModelKeys, event_id: str,
                            feedback: Mapping[str, np.ndarray],
                            reward: float | None = None) -> FeedbackOutcome:
        """Join one feedback with its context (see :meth:`take_feedback_many`)."""
        return (await self.take_feedback_many(
            mk, [(event_id, feedback)], None if reward is None else [reward]))[0]

    async def read_contexts(self, mk: ModelKeys, event_ids: Sequence[str],
                            ) -> list[Mapping[str, np.ndarray] | str]:
        """Each event's logged context, or "unknown" (none) or "duplicate" (its feedback was
        taken), in one MGET (the keys share the model's hash tag).  A read, not a take: the
        join that follows is still the exactly-once step.  A context stored sparse is made
        dense only where the join reads it (:class:`~app.store.codec.DenseOnRead`): a
        batch of wide contexts costs their non-zeros."""
        if not event_ids:
            return []
        blobs: Any = await self.redis.mget([mk.context(eid) for eid in event_ids])
        return ["unknown" if blob is None else "duplicate" if blob == TOMBSTONE
                else codec.DenseOnRead(blob) for blob in blobs]

    async def due_decisions(self, mk: ModelKeys, now: float, limit: int = 1000) -> list[str]:
        """Event ids whose deadline is before ``now`` (Redis clock seconds)."""
        ids: Any = await self.redis.zrangebyscore(mk.pending, "-inf", f"({now}", start=0, num=limit)
        return [text(i) or "" for i in ids]

    async def expire_many(self, mk: ModelKeys, event_ids: Sequence[str], mode: str,
                          default_feedback: Mapping[str, np.ndarray]) -> list[str]:
        """End each overdue decision; per id "expired", "not_due" or "gone".

        Each decision ends in its own ``expire_decision`` Lua step, so a
        feedback and the sweeper can never both end it (both remove the
        pending entry atomically); the pipeline only saves round trips.  An
        apprentice decision ended with the ``no_click`` default counts as an
        apprentice event of reward 0.
        """
        if not event_ids:
            return []
        blob = codec.encode(default_feedback)
        async with self.redis.pipeline(transaction=False) as pipe:
            for eid in event_ids:
                await self.scripts.run(
                    "expire_decision", [mk.context(eid), mk.pending, mk.events, mk.snapshot,
                                        mk.partial(eid), mk.apprentice(eid), mk.stats,
                                        mk.event_index, mk.asleep],
                    [eid, mode, blob], client=pipe)
            replies: Any = await pipe.execute()
        return [text(r[0]) or "gone" for r in replies]

    async def server_time(self) -> float:
        """Redis clock in seconds (deadlines use it)."""
        sec, usec = await self.redis.time()
        return sec + usec / 1e6

    async def last_stream_id(self, mk: ModelKeys) -> str:
        """Id of the newest entry ever added to the model's stream ("0-0" if none)."""
        raw: Any = await self.redis.xinfo_stream(mk.events)
        info = {text(k): v for k, v in raw.items()}
        return text(info.get("last-generated-id")) or "0-0"

    async def handled_id(self, mk: ModelKeys) -> str:
        """The newest stream id whose batch the trainer has handled: published, every
        after-publish step run, acknowledged ("0-0": none yet)."""
        return text(await self.redis.hget(mk.stats, HANDLED_FIELD)) or "0-0"

    async def group_progress(self, mk: ModelKeys) -> tuple[str, int]:
        """``(last delivered id, unacknowledged count)`` of the trainer group."""
        groups: Any = await self.redis.xinfo_groups(mk.events)
        for group in groups:
            fields = {text(k): v for k, v in group.items()}
            if text(fields.get("name")) == TRAINER_GROUP:
                return (text(fields.get("last-delivered-id")) or "0-0",
                        int(fields.get("pending") or 0))
        return "0-0", 0
