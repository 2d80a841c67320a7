"""Trainer role: applies each model's event stream to its learner, exactly once.

One pass (:func:`run_pass`) balances the trainer leases, at most once a
second (each live trainer holds about ``ceil(models / live trainers)`` of
them; a dead trainer's leases expire and are taken over), then runs one
:func:`step` per owned model:

1. read a batch of about ``batch_size`` events, only while holding the lease (one Lua
   step): first any unacknowledged entries (a dead trainer's, or ours after a refused
   publish), then new ones; an entry is one joined feedback batch (a packed entry of
   its events, taken whole) or one event;
2. acknowledge entries not newer than the snapshot's ``last_id`` (applied
   before a crash, re-delivered) and move poison events (delivered more
   than ``max_deliveries`` times, undecodable, or refused by the learner)
   to the dead-letter stream with the reason, one dead letter each (a poison event's
   good neighbours in its packed entry go back on the stream in the same step:
   :func:`_apply`);
3. decode the rest into columns (one ``np.frombuffer`` per field when all
   share a layout; the batch stays columnar up to the publish, split into
   rows only to find an entry the learner refuses) and ``learn_many`` it
   in a thread (a wide model's batch a part of at most ``max_dense_cells`` dense
   cells at a time, each part published on its own; one matrix product for
   the logged-only learners, an in-order loop for the others), with the
   model's current noise rates (so an NREst estimate applies from the next
   batch on);
4. publish state + version + ``last_id`` + counters (events applied, the
   sum and count of the observed clicks, from which ``debiased_reward`` is
   computed with the rates in force when it is read) in one Lua step that
   also checks the lease and the version and copies the applied entries to
   the model's decision log (:mod:`app.store.decisionlog`); this step and
   the next are shielded from cancellation;
5. once published: the after-publish hooks of the trainer's features
   (:data:`workers.hooks.FEATURES`: NREst samples, anchor rows, a
   kept version at most once per the model's interval, a quality-series point
   at most once per ``series_interval`` or ``series_events``, the drift
   detector, the challengers),
   each on its own; one that raises fails the step after the others ran.
   THEN acknowledge, trim and mark the batch handled (what a sync waits for,
   so that it sees what the hooks wrote).
   After the pass, the models that went quiet get their due point and their
   newest version kept (the features' after-pass hooks), so neither
   trails a burst by more than its interval.

A crash anywhere before the publish leaves the entries pending (the next
owner claims them); a crash between publish and acknowledgement re-delivers
entries that step 2 skips.  So every accepted event changes the model
exactly once.  A publish refused because the model changed meanwhile (a
reset, rollback, import or promotion: they keep ``last_id``) hands the
batch back without counting the delivery and learns it again on the new
version.  A model whose step raises is reported and retried later
(:mod:`workers.failures`); the models after it in the pass are not held up.
Idle models are read less often (:mod:`workers.pacing`).
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import enum
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.features import row_spans
from app.learners.base import Batch, Event, Learner, batch_size, iter_events, stack_events
from app.learners.build import apply_noise_rates, build_learner
from app.learners.offpolicy import learn_finite
from app.learners.proxy import calibrated_probability
from app.store.codec import CodecError
from app.store.decisionlog import LoggedBatch, LogRetention
from app.store.delivery import Deliveries, TrainerView
from app.store.events import decode_entries, decode_entry
from app.store.keys import ModelKeys
from app.store.results import ScriptResult
from app.store.snapshots import PublishConflict
from app.store.util import parse_stream_id
from workers import failures, hooks
from workers.context import CachedLearner, ModelRef, ModelSlot, WorkerContext
from workers.feature import Published

logger = logging.getLogger(__name__)
#: The order free models are offered in (its own generator: the global one belongs to the
#: process, e.g. to a test framework drawing examples beside an in-process trainer).
_shuffler = random.Random()


@dataclass
class _Outcome:
    """What one batch produced, before it is published."""

    applied: Batch | None
    """The applied events as a columnar batch (None: none applied)."""
    rows: list[int]
    """Their rows in the decoded batch."""
    rejected: list[tuple[int, str]]
    """Rows the learner refused, with the reason."""


#: Seconds between two lease balancings (a new model waits at most this long for a trainer).
#: Balancing costs 3-5 round trips; done on every pass, those waited behind the API's
#: requests in a shared event loop and held the trainer at about 10k events/s.
BALANCE_SECONDS = 1.0


async def run_pass(ctx: WorkerContext) -> int:
    """Balance the leases (at most every :data:`BALANCE_SECONDS`), then one step per owned
    model that is due (:mod:`workers.pacing`), a step that raises reported and isolated
    (:mod:`workers.failures`); returns events applied."""
    now = time.monotonic()
    if now - ctx.balanced_at >= BALANCE_SECONDS:
        ctx.balanced_at = now
        await balance_leases(ctx, await ctx.store.models.all_models())
    due = [ref for ref in sorted(ctx.held) if not ctx.paced or ctx.pacer.due(ref, now)]
    # the idle models' reads in one round trip (a model busy before is read in its step);
    # those idle longest are read with their asleep flag (workers.pacing)
    idle = [ref for ref in due if ctx.pacer.waiting(ref)]
    sleepy = {ref for ref in idle if ctx.listening and ctx.paced and ctx.pacer.sleepy(ref)}
    firsts: dict[ModelRef, Deliveries | Exception | None] = dict(zip(
        idle, await ctx.delivery.read_batches(
            [(ModelKeys(*ref), IDLE_READ_SIZE, ref in sleepy) for ref in idle],
            ctx.config.worker_id),
        strict=True))
    applied = 0
    for ref in due:
        first = firsts.get(ref, _UNREAD)
        if ctx.stopping.is_set():  # read, not applied: pending, as if not delivered
            if isinstance(first, Deliveries) and first:
                await ctx.delivery.unread(ModelKeys(*ref), ctx.config.worker_id, first)
            continue
        slot = ctx.slots.get(ref)
        if slot is None:
            continue  # forgotten meanwhile (a lease lost during the pass)
        try:
            if isinstance(first, Exception):
                raise first
            applied += await step(ctx, slot, first)
            if ref in sleepy and isinstance(first, Deliveries) and not first:
                ctx.pacer.asleep(ref, now)
        except Exception as exc:
            if failures.store_unreachable(exc):
                raise  # the store, not the model: the worker retries the pass
            await failures.step_failed(ctx, ref, exc)  # this model only: the others learn
        else:
            await failures.step_succeeded(ctx, ref)
    await hooks.run_after_pass(ctx)
    return applied


def pause(ctx: WorkerContext, applied: int) -> float:
    """Seconds the trainer sleeps after a pass that applied ``applied`` events (less than a
    full batch): ``flush_interval``, or, when it applied none, until the next model it holds
    is due (every idle model waiting or asleep: :mod:`workers.pacing`), at most
    :data:`BALANCE_SECONDS` (leases, after-pass hooks); a wake-up ends it sooner
    (:mod:`workers.wake`)."""
    interval = ctx.config.flush_interval
    if applied or not ctx.paced:
        return interval
    wait = ctx.pacer.next_due(ctx.held) - time.monotonic()
    return min(max(wait, interval), max(BALANCE_SECONDS, interval))


async def balance_leases(ctx: WorkerContext, models: list[ModelRef]) -> None:
    """Renew owned leases (unless renewed within a third of their ttl: the keep-alive renews
    them too), give back more than a fair share, take free ones up to it."""
    cfg = ctx.config
    present = set(models)
    for ref in [r for r in ctx.held if r not in present]:
        ctx.forget(ref)  # deleted model
    if time.monotonic() - ctx.renewed_at >= cfg.lease_ttl / 3:
        await renew_leases(ctx)
    live = max(1, await ctx.heartbeats.live_trainers(cfg.heartbeat_ttl))
    share = math.ceil(len(models) / live)
    if len(ctx.held) > share:
        extra = sorted(ctx.held)[share:]
        await ctx.leases.release_many([ModelKeys(*r) for r in extra], cfg.worker_id)
        for ref in extra:
            ctx.forget(ref)
        logger.info("trainer %s: gave back %d model(s) (fair share %d)", cfg.worker_id,
                    len(extra), share)
    elif len(ctx.held) < share:
        free = [r for r in models if r not in ctx.held]
        _shuffler.shuffle(free)
        owners = await ctx.leases.owners([ModelKeys(*r) for r in free])
        wanted = [r for r, owner in zip(free, owners, strict=True)
                  if owner in (None, cfg.worker_id)]  # ours: a restart of this worker
        wanted = wanted[: share - len(ctx.held)]
        taken = await ctx.leases.take_many([ModelKeys(*r) for r in wanted], cfg.worker_id,
                                           int(cfg.lease_ttl * 1000))
        for ref, ok in zip(wanted, taken, strict=True):
            if ok:
                ctx.hold(ref)  # an empty slot: someone else may have published since
                ctx.pacer.taken(ref)
                logger.info("trainer %s: took %s/%s", cfg.worker_id, *ref)


async def renew_leases(ctx: WorkerContext) -> None:
    """Renew every owned lease; forget the ones another trainer holds now."""
    ctx.renewed_at = time.monotonic()
    held = sorted(ctx.held)
    ok = await ctx.leases.take_many([ModelKeys(*r) for r in held], ctx.config.worker_id,
                                    int(ctx.config.lease_ttl * 1000))
    for ref, good in zip(held, ok, strict=True):
        if not good:
            logger.warning("trainer %s: lost the lease of %s/%s", ctx.config.worker_id, *ref)
            ctx.forget(ref)


async def release_leases(ctx: WorkerContext) -> None:
    """Give every owned lease back (clean shutdown: others take over at once)."""
    await ctx.leases.release_many([ModelKeys(*r) for r in sorted(ctx.held)],
                                  ctx.config.worker_id)
    for ref in list(ctx.held):
        ctx.forget(ref)


#: A full read (a backlog) doubles the next read of the model, up to this many times the
#: batch size; a partial read sets it back.  A step's round trips wait behind the API's
#: requests when they share an event loop (``noisyloop serve``), which held steps of 1,000
#: to about 10k events/s: a backlog of a few seconds never drained at that rate.
MAX_BATCH_GROWTH = 8


#: Times one step reads a batch again after the model changed under it (a reset, rollback,
#: import or promotion refused its publish) before leaving it to the next pass.
MODEL_CHANGE_RETRIES = 3


#: Events an idle model's read (one of a pass's pipelined reads) asks for: a bound on the
#: memory those reads take when many idle models get feedback at once (a packed entry, taken
#: whole, passes it by less than one feedback batch).  A full read doubles
#: the next one, as any read does.
IDLE_READ_SIZE = 100


class _Unread(enum.Enum):
    UNREAD = enum.auto()


_UNREAD = _Unread.UNREAD
"""The batch is still to be read."""


class _ModelChanged(Exception):
    """The model's version moved while a batch was learned: learn it again on the new one."""


class _EntriesSplit(Exception):
    """Packed entries of the batch held bad events beside good ones: the bad ones were
    dead-lettered and the good ones put back on the stream (a new entry each); learn the
    rest of the batch again, without them."""


async def step(ctx: WorkerContext, slot: ModelSlot,
               first: Deliveries | _Unread | None = _UNREAD) -> int:
    """Read, apply, publish and acknowledge one batch of one model; returns events applied.

    When the model changes under the batch (a reset, rollback, import or
    promotion publishes a new version), the batch is handed back with its
    delivery counts as they were (no failed delivery: only entries that
    really fail reach the dead letters) and read again, half as large, to be
    learned on the new version; the events are applied once, on top of it.
    So is the rest of a batch whose packed entries were split (a bad event
    beside good ones: :func:`_apply`).
    ``first``: the model's first batch, already read (by :func:`run_pass`, at most
    :data:`IDLE_READ_SIZE` events, or one packed entry).
    """
    mk = ModelKeys(*slot.ref)
    for _ in range(MODEL_CHANGE_RETRIES):
        batch = await _read(ctx, slot, first)
        first = _UNREAD
        if not batch:
            return 0
        try:
            return await _apply(ctx, slot, batch)
        except _ModelChanged:
            slot.read_size = max(1, len(batch) // 2)  # a smaller batch gets through sooner
            await ctx.delivery.unread(mk, ctx.config.worker_id, batch)
        except _EntriesSplit:
            await ctx.delivery.unread(mk, ctx.config.worker_id, batch)
    return 0


async def _read(ctx: WorkerContext, slot: ModelSlot,
                batch: Deliveries | _Unread | None = _UNREAD) -> Deliveries | None:
    """The model's next batch (None or empty: nothing to do; ``batch``: as already read), its
    next read size and pace set."""
    cfg, ref = ctx.config, slot.ref
    if batch is _UNREAD:
        count = slot.read_size or cfg.batch_size
        batch = await ctx.delivery.read_batch(ModelKeys(*ref), cfg.worker_id, count)
    else:
        count = IDLE_READ_SIZE
    if batch is None:
        ctx.forget(ref)  # the lease expired or the model is gone
        return None
    slot.read_size = (min(2 * count, MAX_BATCH_GROWTH * cfg.batch_size)
                      if len(batch) >= count else cfg.batch_size)
    if batch:
        ctx.pacer.busy(ref)
    else:
        ctx.pacer.idle(ref, time.monotonic())
    return batch


async def _apply(ctx: WorkerContext, slot: ModelSlot, batch: Deliveries) -> int:
    """Apply ``batch`` (the steps 2-5 of the module docstring); returns events applied.

    A batch whose contexts would take more than the worker's ``max_dense_cells`` dense
    (entries x ``n_features``) is applied in consecutive parts within it, each published on
    its own (learning a batch in parts equals learning it at once: the learners' contract),
    so a wide model's batch holds one part dense at a time.  A part ends where an entry
    ends: a packed entry is applied whole, in one publish (the ``last_id`` check skips
    whole entries), and the join packs a wide model's events in entries of at most one
    part (:meth:`~app.store.events.EventStore.take_feedback_many`).

    Raises :class:`_ModelChanged` when the model's version moved meanwhile, and
    :class:`_EntriesSplit` when a packed entry (a feedback batch) held a bad event (not
    decodable, or refused by the learner) beside good ones: in one step the bad ones go to
    the dead letters, one event each, and the good ones back on the stream as a new
    entry, the original acknowledged; the learner, which learned them, is dropped, and the
    rest of the batch is learned again.  So a bad event never takes its neighbours with
    it, and each good one is applied once: the split and the acknowledgement are one step.
    """
    cfg = ctx.config
    mk = ModelKeys(*slot.ref)
    view = await ctx.delivery.read_model(mk)
    if view is None:
        ctx.forget(slot.ref)
        return 0
    cached = await _learner(ctx, slot, view)
    if cached is None:
        return 0
    parts = batch.entry_spans(row_spans(len(batch), view.config.n_features,
                                        cfg.max_dense_cells))
    if len(parts) > 1:  # wide contexts: learned (and published) a part at a time
        total = 0
        for rows in parts:
            total += await _apply(ctx, slot, batch.part(rows))
        return total
    skipped, dead, fresh = _triage(batch, view.info.last_id, cfg.max_deliveries)
    # in a thread, as the update: a large batch would stall the API's requests in serve's loop
    decoded = await asyncio.to_thread(_decode, batch, fresh, dead)
    if not decoded.positions:
        await _dead_letter(ctx, mk, batch, dead)
        await ctx.delivery.ack_and_trim(mk, skipped, None)
        return 0
    rates = (view.noise.rho0, view.noise.rho1) if view.noise else (0.0, 0.0)
    cached, outcome = await _learn(ctx, slot, cached, decoded, rates, view.config.learns)
    dead += [(decoded.positions[row], reason) for row, reason in outcome.rejected]
    splits = _splits(batch, dead)
    await _dead_letter(ctx, mk, batch, dead, splits)
    if splits:
        slot.learner = None  # it learned the split entries' good events
        raise _EntriesSplit
    if cached is None or outcome.applied is None:
        await ctx.delivery.ack_and_trim(mk, skipped, None)
        return 0
    applied = [decoded.positions[row] for row in outcome.rows]
    observed = np.array([batch.kinds[i] for i in applied], dtype=object) != b"timeout"
    return await _commit(ctx, slot, view, cached, outcome.applied, observed, rates,
                         skipped + batch.entry_ids(decoded.positions),
                         batch.stream_ids[decoded.positions[-1]], _logged(ctx, batch, applied))


def _triage(batch: Deliveries, last_id: str, max_deliveries: int,
            ) -> tuple[list[str], list[tuple[int, str]], list[int]]:
    """Sort a batch's entries into ``(ids to only acknowledge, dead letters, entries to apply)``.

    Only acknowledged (stream ids): entries not newer than the snapshot's ``last_id``
    (applied before a crash, re-delivered; a prefix of the batch, whose ids
    ascend; a packed entry is applied whole, in one publish) and entries deleted from the
    stream.  Dead: rows of entries delivered more than ``max_deliveries`` times, and
    malformed packed entries.  Dead letters and rows to apply are indices into the batch.
    """
    first_new = bisect.bisect_right(batch.stream_ids, parse_stream_id(last_id),
                                    key=parse_stream_id)
    skipped = batch.entry_ids(range(first_new))
    dead: list[tuple[int, str]] = []
    if None not in batch.kinds[first_new:] and not batch.malformed \
            and max(batch.counts[first_new:], default=0) <= max_deliveries:  # the usual case
        return skipped, dead, list(range(first_new, len(batch)))
    fresh: list[int] = []
    for i in range(first_new, len(batch)):
        if batch.kinds[i] is None and not batch.fields(i):  # deleted (stored ones all have k)
            skipped.append(batch.stream_ids[i])
        elif i in batch.malformed:
            dead.append((i, batch.malformed[i][0]))
        elif batch.counts[i] > max_deliveries:
            dead.append((i, f"delivered {batch.counts[i]} times without being applied"))
        else:
            fresh.append(i)
    return skipped, dead, fresh


@dataclass
class _Decoded:
    """The decoded entries of a batch: a columnar batch, or (when their layouts differ)
    each entry's fields."""

    positions: list[int]
    """Index in the read batch of each decoded entry (row), in order."""
    columns: Batch | None
    rows: list[Event] | None

    def batch(self) -> Batch:
        """All rows as one columnar batch (stacking the rows raises if they do not fit)."""
        return self.columns if self.columns is not None else stack_events(self.rows or [])

    def events(self) -> list[Event]:
        """One event per row (to learn them one by one)."""
        return self.rows if self.rows is not None else list(iter_events(self.columns or {}))


def _decode(batch: Deliveries, fresh: list[int], dead: list[tuple[int, str]]) -> _Decoded:
    """Decode the entries ``fresh``: at once when all share one layout (the usual case).

    Otherwise (or when one is malformed) entries are decoded one by one and
    malformed ones are added to ``dead``.
    """
    columns = decode_entries([batch.contexts[i] for i in fresh],
                             [batch.feedbacks[i] for i in fresh])
    if columns is not None:
        return _Decoded(fresh, columns, None)
    positions: list[int] = []
    rows: list[Event] = []
    for i in fresh:
        try:
            rows.append(decode_entry(batch.contexts[i], batch.feedbacks[i]))
        except (CodecError, ValueError) as exc:
            dead.append((i, f"malformed entry: {exc!r}"))
            continue
        positions.append(i)
    return _Decoded(positions, None, rows)


async def _learner(ctx: WorkerContext, slot: ModelSlot, view: TrainerView
                   ) -> CachedLearner | None:
    """The cached learner if it is still at the published version, else a reload (None: the
    model is gone; :class:`_ModelChanged` when it was published since ``view`` was read)."""
    cached = slot.learner
    uid = str(view.config.uid or "")
    if cached is not None and cached.uid == uid and cached.version == view.info.version:
        return cached
    snap = await ctx.store.snapshots.load(ModelKeys(*slot.ref))
    if snap is None:
        ctx.forget(slot.ref)
        return None
    if snap.version != view.info.version:
        raise _ModelChanged  # published since the view was read (a promotion may change the config)
    cached = CachedLearner(uid, snap.version, view.config, build_learner(view.config, snap.state))
    slot.learner = cached
    return cached


async def _learn(ctx: WorkerContext, slot: ModelSlot, cached: CachedLearner, decoded: _Decoded,
                 rates: tuple[float, float], learns: bool,
                 ) -> tuple[CachedLearner | None, _Outcome]:
    """``learn_many`` the decoded batch in a thread; on failure find the culprits one by one.

    ``learns`` False (the model's config does not learn, :attr:`ModelConfig.learns`): the
    events are applied (published, logged, counted and acknowledged as any) without the
    learner's learn step, so its weights stay.  Returns the learner that holds the result
    (None when the model is gone).
    """
    learner = cached.learner
    apply_noise_rates(learner, *rates)
    learn = learn_finite if learns else _keep_weights
    try:
        batch = decoded.batch()
        await asyncio.wait_for(asyncio.to_thread(learn, learner, batch),
                               ctx.config.handler_timeout)
        return cached, _Outcome(batch, list(range(len(decoded.positions))), [])
    except TimeoutError:
        slot.learner = None  # the thread may still change it
        raise
    except Exception as exc:
        logger.warning("trainer: batch of %s/%s failed (%r); isolating entries", *slot.ref, exc)
    slot.learner = None
    view = await ctx.delivery.read_model(ModelKeys(*slot.ref))
    fresh = None if view is None else await _learner(ctx, slot, view)
    if fresh is None:  # the model is gone
        return None, _Outcome(None, [], [])
    apply_noise_rates(fresh.learner, *rates)
    learned, outcome = await asyncio.wait_for(
        asyncio.to_thread(_learn_isolated, fresh.learner, decoded.events(), learn),
        ctx.config.handler_timeout)
    fresh.learner = learned
    return fresh, outcome


def _keep_weights(learner: Learner, batch: Batch) -> None:
    """The learn step of a model that does not learn: nothing changes."""


def _learn_isolated(learner: Learner, events: list[Event],
                    learn: Callable[[Learner, Batch], None],
                    ) -> tuple[Learner, _Outcome]:
    """Learn events one at a time on copies (with ``learn``); events that raise are rejected
    with the reason."""
    rows: list[int] = []
    rejected: list[tuple[int, str]] = []
    for row, event in enumerate(events):
        trial = copy.deepcopy(learner)
        try:
            learn(trial, stack_events([event]))
        except Exception as exc:
            rejected.append((row, f"learner refused the event: {exc!r}"))
            continue
        learner = trial
        rows.append(row)
    applied = stack_events([events[row] for row in rows]) if rows else None
    return learner, _Outcome(applied, rows, rejected)


def _splits(batch: Deliveries, dead: list[tuple[int, str]]) -> list[list[int]]:
    """The other rows of each packed entry with a dead row and others (one list per entry:
    to put back on the stream)."""
    bad = {i for i, _ in dead}
    hit = set(batch.entry_ids(sorted(bad)))
    if not hit or len(batch.entry_ids()) == len(batch):  # no packed entry: no split
        return []
    rows = batch.entry_rows()
    return [good for sid in sorted(hit, key=parse_stream_id)
            if (good := [i for i in rows[sid] if i not in bad])]


async def _dead_letter(ctx: WorkerContext, mk: ModelKeys, batch: Deliveries,
                       dead: list[tuple[int, str]], splits: list[list[int]] | None = None,
                       ) -> None:
    if dead:
        logger.error("trainer: %d poison event(s) of %s/%s to the dead-letter stream: %s",
                     len(dead), mk.tenant, mk.model, dead[0][1])
        moved = await ctx.delivery.dead_letter(mk, batch, dead, splits or ())
        ctx.metrics.events_dead_lettered.labels(mk.tenant, mk.model).inc(moved)


async def _commit(ctx: WorkerContext, slot: ModelSlot, view: TrainerView, cached: CachedLearner,
                  applied: Batch, observed: np.ndarray, rates: tuple[float, float],
                  ack_ids: list[str], last_id: str, logged: LoggedBatch | None) -> int:
    """Publish, acknowledge, then run the after-publish hooks (:mod:`workers.hooks`), all
    shielded from cancellation; returns the events applied (0 if refused).

    ``observed`` marks the rows of ``applied`` that are real feedback (not a
    sweeper's default event); ``logged`` are their stored fields, added to the
    decision log by the publish (None: the log is off).  A hook that raised
    fails the step once the others ran (its events are published and
    acknowledged by then: nothing is lost).
    """
    ref = slot.ref
    mk = ModelKeys(*ref)
    n_applied = batch_size(applied)
    clicks = cached.learner.observed_clicks(applied)
    click_sum = float(np.sum(clicks))

    async def publish_then_ack() -> Exception | None:
        version = await ctx.store.snapshots.publish(
            mk, cached.learner.get_state(), expected_version=cached.version, last_id=last_id,
            applied=n_applied, click_sum=click_sum, click_n=len(clicks),
            lease_owner=ctx.config.worker_id, logged=logged,
            retention=_retention(ctx))
        cached.version = version
        _record(ctx, ref, view, n_applied, version, last_id, click_sum, len(clicks), rates)
        failed = await hooks.run_after_publish(ctx, slot, Published(
            view, cached.config, cached.learner, version, applied, observed, clicks, last_id,
            rates, cached))
        # after the hooks: a sync returns once the batch is handled, hooks included, and
        # the failure record is cleared only by a step whose hooks all went through
        await ctx.delivery.ack_and_trim(mk, ack_ids, last_id, handled=True,
                                        succeeded=failed is None)
        return failed

    task = asyncio.ensure_future(publish_then_ack())
    ctx.inflight.add(task)
    task.add_done_callback(ctx.inflight.discard)
    try:
        failed = await asyncio.shield(task)
    except PublishConflict as exc:
        # the version moved (reset, rollback, import, promotion), or the lease is gone:
        # entries stay pending
        logger.info("trainer: publish of %s/%s refused (%s)", *ref, exc)
        if exc.code is not ScriptResult.MOVED:
            ctx.forget(ref)
            return 0
        slot.learner = None
        raise _ModelChanged from exc
    if failed is not None:
        raise failed
    return n_applied


def _retention(ctx: WorkerContext) -> LogRetention:
    return LogRetention(ctx.config.log_max_events, ctx.config.log_max_age)


def _logged(ctx: WorkerContext, batch: Deliveries, positions: list[int]) -> LoggedBatch | None:
    """The applied entries (``positions`` in ``batch``) packed for the decision log; None
    while the log is off."""
    return batch.logged(positions) if _retention(ctx).enabled else None


def _record(ctx: WorkerContext, ref: ModelRef, view: TrainerView, applied: int, version: int,
            last_id: str, click_sum: float, click_n: int, rates: tuple[float, float]) -> None:
    m = ctx.metrics
    m.events_applied.labels(*ref).inc(applied)
    m.model_version.labels(*ref).set(version)
    lag = time.time() - parse_stream_id(last_id)[0] / 1000.0
    m.trainer_lag.labels(*ref).set(max(lag, 0.0))
    n = view.info.click_n + click_n
    if n:
        m.debiased_reward.labels(*ref).set(
            calibrated_probability((view.info.click_sum + click_sum) / n, *rates))
    for kind, value in zip(("rho0", "rho1"), rates, strict=True):
        m.noise_rate.labels(*ref, kind).set(value)
