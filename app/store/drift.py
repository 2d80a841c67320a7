"""Per-model drift detector state, what it last reported, and what a detection does.

The model's trainer (the one writer, under its lease) saves the detector
after every published batch (:mod:`workers.drift`); ``GET /v1/models/{id}``
reads the report back.  One hash: ``state`` (codec arrays) and ``report``
(JSON: status, detections, when the last one was raised, the statistic, the
signal and threshold in use).  A detection is marked in the decision log
(:meth:`DriftStore.mark`, a ``drift`` marker); what else it does is the
model's setting ``drift.action`` (:class:`DriftPolicy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store import codec
from app.store.client import lua_source, run_script
from app.store.keys import ModelKeys

DriftAction = Literal["none", "alert", "recover"]
#: What a detection may do: ``none`` (the model is not watched), ``alert`` (reported,
#: counted, alerted on and marked in the log), ``recover`` (``alert``, and the trainer
#: refits the model on the events since the estimated change).
DRIFT_ACTIONS: tuple[DriftAction, ...] = ("none", "alert", "recover")
#: ``drift.action`` of a model whose config does not say.
DEFAULT_DRIFT_ACTION: DriftAction = "recover"
#: Decision-log marker of a detection.
DRIFT_MARKER = "drift"
#: What the detector watches (the observed click per event) and its test, as reported.
SIGNAL, METHOD = "reward", "page_hinkley"


@dataclass(frozen=True)
class DriftPolicy:
    """What a detection of a model's drift detector does (its config's ``drift``)."""

    action: DriftAction = DEFAULT_DRIFT_ACTION

    @classmethod
    def of(cls, config: ModelConfig) -> DriftPolicy:
        """The policy in a model's config (the default when absent)."""
        given = config.drift.action or DEFAULT_DRIFT_ACTION
        return cls(given if given in DRIFT_ACTIONS else DEFAULT_DRIFT_ACTION)


class DriftStore:
    """Save and read a model's drift detector."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._mark = redis.register_script(lua_source("drift_marker"))

    async def load(self, mk: ModelKeys) -> tuple[dict[str, np.ndarray] | None,
                                                 dict[str, Any] | None]:
        """The detector's arrays and its last report (None, None before the first save)."""
        raw: Any = await self.redis.hmget(mk.drift, ["state", "report"])
        state, report = raw
        return (codec.decode(state) if state else None,
                orjson.loads(report) if report else None)

    async def report(self, mk: ModelKeys) -> dict[str, Any] | None:
        """The last report (None before the first batch)."""
        raw: Any = await self.redis.hget(mk.drift, "report")
        return orjson.loads(raw) if raw else None

    async def save(self, mk: ModelKeys, state: dict[str, np.ndarray],
                   report: dict[str, Any]) -> None:
        """Replace the detector's arrays and report (one round trip)."""
        await self.redis.hset(mk.drift, mapping={"state": codec.encode(state),
                                                 "report": orjson.dumps(report)})

    async def mark(self, mk: ModelKeys, detail: dict[str, Any]) -> None:
        """Add a :data:`DRIFT_MARKER` marker with ``detail`` to the decision log (not once
        the model is gone)."""
        await run_script(self._mark, [mk.meta, mk.log], [DRIFT_MARKER, orjson.dumps(detail)])
