"""Trainer: applies each model's event stream to its learner, exactly once.

For every model, one step is: read a batch from the model's stream with the
trainer consumer group (first this consumer's own unacknowledged entries,
then new ones), skip entries not newer than the snapshot's ``last_id``,
stack the rest into one columnar batch, ``learn_many`` it (off the event
loop), publish state + version + ``last_id`` + counters atomically (only if
the snapshot did not move meanwhile), then acknowledge.  A crash between
publish and ack re-delivers entries that the ``last_id`` check then skips,
so every event changes the model exactly once.

This is the minimal single-trainer version used by ``noisyloop serve``;
leases and claiming a dead trainer's entries build on the same store calls
(:meth:`EventStore.claim_stale`, ``lease_owner`` of
:meth:`SnapshotStore.publish`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import numpy as np

from app.learners.base import Learner, stack_events
from app.learners.proxy import unbiased_click
from app.learning import apply_noise_rates, build_learner
from app.metrics import Metrics
from app.store import STORE_ERRORS, ModelKeys, Store
from app.store.codec import CodecError
from app.store.events import StreamEvent, decode_entry
from app.store.snapshots import PublishConflict
from app.store.util import parse_stream_id

logger = logging.getLogger(__name__)


@dataclass
class _Cached:
    uid: str
    version: int
    learner: Learner


class Trainer:
    """Applies the event streams of all models (see the module docstring)."""

    def __init__(self, store: Store, *, consumer: str = "trainer-0", batch_size: int = 1000,
                 interval: float = 0.05, metrics: Metrics | None = None) -> None:
        self.store = store
        self.consumer = consumer
        self.batch_size = batch_size
        self.interval = interval
        self.metrics = metrics
        self._learners: dict[tuple[str, str], _Cached] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Apply batches until ``stop`` is set; idle for ``interval`` when nothing is queued."""
        while not stop.is_set():
            try:
                applied = await self.run_once()
            except STORE_ERRORS as exc:
                logger.warning("trainer: store unavailable (%s); retrying", exc)
                applied = 0
                await asyncio.sleep(min(1.0, 10 * self.interval))
            if applied == 0:
                try:
                    await asyncio.wait_for(stop.wait(), self.interval)
                except TimeoutError:
                    pass

    async def run_once(self) -> int:
        """One pass over every model; returns the number of events applied."""
        total = 0
        models = await self.store.models.all_models()
        for tenant, model in models:
            try:
                total += await self.step(tenant, model)
            except STORE_ERRORS:
                raise
            except Exception:  # one broken model must not stop the others
                logger.exception("trainer: step of %s/%s failed", tenant, model)
                self._learners.pop((tenant, model), None)
        live = set(models)
        for gone in [k for k in self._learners if k not in live]:
            del self._learners[gone]
        return total

    async def drain(self) -> int:
        """Apply until every stream is empty (tests and ``sync``)."""
        total = 0
        while applied := await self.run_once():
            total += applied
        return total

    async def step(self, tenant: str, model: str) -> int:
        """Read and apply one batch of one model; returns the events applied."""
        mk = ModelKeys(tenant, model)
        entries = await self.store.events.read_group(mk, self.consumer, self.batch_size,
                                                     own_pending=True)
        if not entries:
            entries = await self.store.events.read_group(mk, self.consumer, self.batch_size)
        if not entries:
            return 0
        return await self._apply(mk, entries)

    async def _learner(self, mk: ModelKeys) -> tuple[_Cached, str] | None:
        config = await self.store.models.config(mk.tenant, mk.model)
        info = await self.store.snapshots.info(mk)
        if config is None or info is None:
            return None
        key = (mk.tenant, mk.model)
        cached = self._learners.get(key)
        if cached is None or cached.uid != config["uid"] or cached.version != info.version:
            snap = await self.store.snapshots.load(mk)
            if snap is None:
                return None
            cached = _Cached(config["uid"], snap.version, build_learner(config, snap.state))
            self._learners[key] = cached
        return cached, info.last_id

    async def _apply(self, mk: ModelKeys, entries: list[tuple[str, object]]) -> int:
        found = await self._learner(mk)
        if found is None:  # model deleted meanwhile
            return 0
        cached, last_id = found
        last = parse_stream_id(last_id)
        fresh: list[StreamEvent] = []
        for stream_id, fields in entries:
            if parse_stream_id(stream_id) <= last:
                continue  # applied before a crash, re-delivered: skip
            try:
                fresh.append(decode_entry(stream_id, fields))  # type: ignore[arg-type]
            except (CodecError, KeyError) as exc:
                logger.error("trainer: dropping malformed entry %s of %s/%s: %s",
                             stream_id, mk.tenant, mk.model, exc)
        ids = [sid for sid, _ in entries]
        if not fresh:
            await self.store.events.ack(mk, ids)
            return 0
        noise = await self.store.noise.get(mk)
        rates = (noise.rho0, noise.rho1) if noise else (0.0, 0.0)
        learner = cached.learner
        apply_noise_rates(learner, *rates)
        batch = stack_events([ev.fields for ev in fresh])
        await asyncio.to_thread(learner.learn_many, batch)
        reward_sum, reward_n = 0.0, 0
        if "click" in batch:
            reward_sum = float(np.sum(unbiased_click(batch["click"].astype(float), *rates)))
            reward_n = len(fresh)
        try:
            version = await self.store.snapshots.publish(
                mk, learner.get_state(), expected_version=cached.version,
                last_id=fresh[-1].stream_id, applied=len(fresh),
                reward_sum=reward_sum, reward_n=reward_n)
        except PublishConflict as exc:
            # reset/import/another trainer moved the snapshot: reload and retry later
            logger.info("trainer: publish of %s/%s refused (%s)", mk.tenant, mk.model, exc)
            self._learners.pop((mk.tenant, mk.model), None)
            return 0
        cached.version = version
        await self.store.events.ack(mk, ids)
        await self.store.events.trim(mk, fresh[-1].stream_id)
        await self._record(mk, len(fresh), version, fresh[-1].stream_id)
        return len(fresh)

    async def _record(self, mk: ModelKeys, applied: int, version: int, last_id: str) -> None:
        if self.metrics is None:
            return
        labels = (mk.tenant, mk.model)
        info = await self.store.snapshots.info(mk)
        if info is not None and info.debiased_reward is not None:
            self.metrics.debiased_reward.labels(*labels).set(info.debiased_reward)
        self.metrics.events_applied.labels(*labels).inc(applied)
        self.metrics.model_version.labels(*labels).set(version)
        lag = time.time() - parse_stream_id(last_id)[0] / 1000.0
        self.metrics.trainer_lag.labels(*labels).set(max(lag, 0.0))
