"""What NREst reads: per-model sample buffers and the queue of requested runs.

The trainer appends the logged ``(x, played label, noisy click)`` of every
applied feedback event of a noise-estimating model to the model's capped
``samples`` list (one codec blob per sample, newest last) and counts them
in the ``samples_new`` field of the model's noise hash; the jobs role
reads the buffer, estimates, and subtracts the samples it consumed.

``POST .../noise/estimate`` queues a job
(:meth:`app.store.noise.NoiseStore.queue_estimate`).

The anchor estimator (the default, :mod:`app.learners.noise_anchor`) reads
no inputs: :class:`AnchorStore` keeps ``(propensity, out-of-sample score,
click)`` of every observed play, the shadow scorer's state, the model's
estimator settings and the last anchor outcome.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.noise_publish import DEFAULT_MAX_WIDTH
from app.store import codec, keys
from app.store.dueset import DueSet
from app.store.keys import SAMPLES_NEW_FIELD, ModelKeys
from app.store.noise import DEFAULT_ESTIMATOR
from app.store.util import text


@dataclass(frozen=True)
class Samples:
    """A model's sample buffer, stacked."""

    X: np.ndarray
    played: np.ndarray
    clicks: np.ndarray

    def __len__(self) -> int:
        return len(self.clicks)


class SampleStore:
    """Sample buffers."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.noise_due = DueSet(redis, keys.NOISE_DUE)

    async def append(self, mk: ModelKeys, X: np.ndarray, played: np.ndarray,
                     clicks: np.ndarray, cap: int) -> None:
        """Append samples, keep the newest ``cap``, count them as new (one transaction); the
        model is then due for a look by the jobs role (:mod:`app.store.dueset`)."""
        n = len(clicks)
        if n == 0:
            return
        blobs = codec.encode_columns({"x": X, "played": played, "click": clicks})
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(mk.samples, *blobs)
            pipe.ltrim(mk.samples, -cap, -1)
            pipe.hincrby(mk.noise, SAMPLES_NEW_FIELD, n)
            await pipe.execute()
        await self.noise_due.lower(mk, time.time())

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
        return await _counts(self.redis, models, SAMPLES_NEW_FIELD)

    async def consume(self, mk: ModelKeys, n: int) -> None:
        """Mark ``n`` samples as used by an estimate (later arrivals stay counted)."""
        if n and await self.redis.exists(mk.noise):
            await self.redis.hincrby(mk.noise, SAMPLES_NEW_FIELD, -n)


#: Estimators a model's noise rates can come from (``estimator`` of its noise hash).
ESTIMATORS = ("anchor", "nrest", "fixed")
#: Fields of a model's noise hash that this module owns (beside ``samples_new``).
ESTIMATOR_FIELD = "estimator"
MAX_WIDTH_FIELD = "max_width"
HALF_LIFE_FIELD = "half_life"
ONE_RIGHT_FIELD = "one_right_label"
ANCHORS_NEW_FIELD = "anchors_new"
ANCHOR_FIELD = "anchor"
#: One anchor row: propensity, out-of-sample score (NaN: not eligible), click.
_ROW = np.dtype("<f4")
ROW_BYTES = 3 * _ROW.itemsize


@dataclass(frozen=True)
class Anchors:
    """A model's anchor rows (oldest first) and its shadow scorer's state."""

    prob: np.ndarray
    score: np.ndarray
    click: np.ndarray

    def __len__(self) -> int:
        return len(self.click)


@dataclass(frozen=True)
class EstimatorSettings:
    """How a model's noise rates are estimated, and the last anchor outcome (None: none yet)."""

    estimator: str = DEFAULT_ESTIMATOR
    max_width: float = DEFAULT_MAX_WIDTH
    last: dict[str, Any] | None = None
    half_life: float | None = None
    """Plays after which a play weighs half in the anchor estimate (None: all alike)."""
    one_right_label: bool | None = None
    """Whether the model's owner stated that every input has exactly one right label (None:
    not said: the learner's setting holds)."""


class AnchorStore:
    """Per-model anchor rows ``(propensity, score, click)`` of every observed play, the
    shadow scorer that scored them, and the estimator settings (see
    :mod:`app.learners.noise_anchor`).

    The rows are one string of packed little-endian float32 triples (12 bytes a
    play), appended by the model's trainer (the one writer, under its lease)
    and cut to the newest ``cap`` rows when it holds twice as many.
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self.noise_due = DueSet(redis, keys.NOISE_DUE)

    async def append(self, mk: ModelKeys, prob: np.ndarray, score: np.ndarray,
                     click: np.ndarray, scorer_state: Mapping[str, np.ndarray],
                     cap: int) -> None:
        """Append rows and save the scorer's state with them; count the rows as new; the
        model is then due for a look by the jobs role (:mod:`app.store.dueset`)."""
        rows = np.column_stack([prob, score, click]).astype(_ROW)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.append(mk.anchors, rows.tobytes())
            pipe.set(mk.anchor_scorer, codec.encode(scorer_state))
            pipe.hincrby(mk.noise, ANCHORS_NEW_FIELD, len(rows))
            length, *_ = await pipe.execute()
        await self.noise_due.lower(mk, time.time())
        if int(length) > 2 * cap * ROW_BYTES:
            tail: Any = await self.redis.getrange(mk.anchors, -cap * ROW_BYTES, -1)
            await self.redis.set(mk.anchors, tail)

    async def scorer_state(self, mk: ModelKeys) -> dict[str, np.ndarray] | None:
        """The saved shadow scorer's state, or None before the first append."""
        raw: Any = await self.redis.get(mk.anchor_scorer)
        return codec.decode(raw) if raw else None

    async def load(self, mk: ModelKeys, limit: int) -> Anchors | None:
        """The newest ``limit`` rows, or None when there are none."""
        raw: Any = await self.redis.getrange(mk.anchors, -limit * ROW_BYTES, -1)
        n = len(raw or b"") // ROW_BYTES
        if n == 0:
            return None
        rows = np.frombuffer(raw[-n * ROW_BYTES:], dtype=_ROW).reshape(n, 3).astype(np.float64)
        return Anchors(rows[:, 0], rows[:, 1], rows[:, 2])

    async def count(self, mk: ModelKeys) -> int:
        """Rows kept (at most twice the cap given to :meth:`append`)."""
        return int(await self.redis.strlen(mk.anchors)) // ROW_BYTES

    async def new_counts(self, models: list[ModelKeys]) -> list[int]:
        """Rows added since the last anchor estimate, per model (one round trip)."""
        return await _counts(self.redis, models, ANCHORS_NEW_FIELD)

    async def consume(self, mk: ModelKeys, n: int) -> None:
        """Mark ``n`` rows as used by an estimate (later arrivals stay counted)."""
        if n and await self.redis.exists(mk.noise):
            await self.redis.hincrby(mk.noise, ANCHORS_NEW_FIELD, -n)

    async def settings(self, mk: ModelKeys, default: str = DEFAULT_ESTIMATOR
                       ) -> EstimatorSettings:
        """The model's estimator settings and last anchor outcome (defaults when unset;
        ``default``: the model's estimator when it has not chosen one)."""
        estimator, max_width, last, half_life, one_right = await self.redis.hmget(
            mk.noise, [ESTIMATOR_FIELD, MAX_WIDTH_FIELD, ANCHOR_FIELD, HALF_LIFE_FIELD,
                       ONE_RIGHT_FIELD])
        return EstimatorSettings(text(estimator) or default,
                                 float(max_width) if max_width else DEFAULT_MAX_WIDTH,
                                 orjson.loads(last) if last else None,
                                 float(half_life) if half_life and float(half_life) else None,
                                 text(one_right) == "1" if one_right else None)

    async def configure(self, mk: ModelKeys, *, estimator: str | None = None,
                        max_width: float | None = None, half_life: float | None = None
                        ) -> None:
        """Set the estimator, the widest published interval and/or the anchor half-life
        (0: every play alike), already validated."""
        mapping: dict[str, str | float] = {}
        if half_life is not None:
            mapping[HALF_LIFE_FIELD] = half_life
        if estimator is not None:
            mapping[ESTIMATOR_FIELD] = estimator
        if max_width is not None:
            mapping[MAX_WIDTH_FIELD] = max_width
        if mapping and await self.redis.exists(mk.noise):
            await self.redis.hset(mk.noise, mapping=mapping)  # type: ignore[arg-type]

    async def state_one_right_label(self, mk: ModelKeys, stated: bool | None) -> None:
        """Record whether the owner states that every input has exactly one right label
        (None: forget what was said; the learner's setting holds again)."""
        if not await self.redis.exists(mk.noise):
            return
        if stated is None:
            await self.redis.hdel(mk.noise, ONE_RIGHT_FIELD)
        else:
            await self.redis.hset(mk.noise, ONE_RIGHT_FIELD, "1" if stated else "0")

    async def record(self, mk: ModelKeys, outcome: Mapping[str, Any]) -> None:
        """Store the outcome of the last anchor estimate (published or not)."""
        if await self.redis.exists(mk.noise):
            await self.redis.hset(mk.noise, ANCHOR_FIELD, orjson.dumps(outcome).decode())


async def _counts(redis: aioredis.Redis, models: list[ModelKeys], name: str) -> list[int]:
    """Integer field ``name`` of each model's noise hash (0 when unset), one round trip."""
    if not models:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for mk in models:
            pipe.hget(mk.noise, name)
        replies: Any = await pipe.execute()
    return [int(r or 0) for r in replies]
