"""What NREst reads: per-model sample buffers and the queue of requested runs.

The trainer appends the logged ``(x, played label, noisy click)`` of every
applied feedback event of a noise-estimating model to the model's capped
``samples`` list (one codec blob per sample, newest last) and counts them
in the ``samples_new`` field of the model's noise hash; the NREst role
reads the buffer, estimates, and subtracts the samples it consumed.

``POST .../noise/estimate`` queues ``"tenant/model/job"`` on
:data:`keys.NREST_QUEUE` (see :meth:`app.store.noise.NoiseStore.queue_estimate`);
:func:`SampleStore.pop_job` takes the oldest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.store import codec, keys
from app.store.keys import SAMPLES_NEW_FIELD, ModelKeys
from app.store.util import text


@dataclass(frozen=True)
class QueuedJob:
    """One requested NREst run."""

    tenant: str
    model: str
    job_id: str


@dataclass(frozen=True)
class Samples:
    """A model's sample buffer, stacked."""

    X: np.ndarray
    played: np.ndarray
    clicks: np.ndarray

    def __len__(self) -> int:
        return len(self.clicks)


class SampleStore:
    """Sample buffers and the NREst job queue."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def append(self, mk: ModelKeys, X: np.ndarray, played: np.ndarray,
                     clicks: np.ndarray, cap: int) -> None:
        """Append samples, keep the newest ``cap``, count them as new (one transaction)."""
        n = len(clicks)
        if n == 0:
            return
        blobs = codec.encode_columns({"x": X, "played": played, "click": clicks})
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(mk.samples, *blobs)
            pipe.ltrim(mk.samples, -cap, -1)
            pipe.hincrby(mk.noise, SAMPLES_NEW_FIELD, n)
            await pipe.execute()

    async def load(self, mk: ModelKeys) -> Samples | None:
        """The whole buffer, or None when it is empty."""
        raw: Any = await self.redis.lrange(mk.samples, 0, -1)
        if not raw:
            return None
        rows = [codec.decode(blob) for blob in raw]
        return Samples(np.stack([r["x"] for r in rows]),
                       np.array([int(r["played"]) for r in rows], dtype=np.int64),
                       np.array([float(r["click"]) for r in rows]))

    async def new_counts(self, models: list[ModelKeys]) -> list[int]:
        """Samples added since the last estimate, per model (one round trip)."""
        if not models:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in models:
                pipe.hget(mk.noise, SAMPLES_NEW_FIELD)
            replies: Any = await pipe.execute()
        return [int(r or 0) for r in replies]

    async def consume(self, mk: ModelKeys, n: int) -> None:
        """Mark ``n`` samples as used by an estimate (later arrivals stay counted)."""
        if n and await self.redis.exists(mk.noise):
            await self.redis.hincrby(mk.noise, SAMPLES_NEW_FIELD, -n)

    async def pop_job(self) -> QueuedJob | None:
        """The oldest queued NREst run, or None."""
        raw: Any = await self.redis.rpop(keys.NREST_QUEUE)
        if raw is None:
            return None
        ref, _, job_id = (text(raw) or "").rpartition(keys.MODEL_SEP)
        tenant, model = keys.split_model_ref(ref)
        return QueuedJob(tenant, model, job_id)
