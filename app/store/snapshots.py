"""Model snapshots: learned arrays + version + last applied stream id + counters.

A snapshot is one hash per model.  :meth:`SnapshotStore.publish` replaces the
state, bumps the version, moves ``last_id`` and adds the batch's counters in
one Lua step, optionally only if the version is still the one the publisher
started from and the publisher still holds the model's lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.learners.proxy import calibrated_probability
from app.store import codec
from app.store.client import Scripts
from app.store.decisionlog import LoggedBatch, LogRetention
from app.store.keys import ModelKeys
from app.store.results import ScriptResult
from app.store.util import text, utc_now

#: Trainer-published counters of a snapshot (no state).
COUNTER_FIELDS = ("version", "last_id", "events_applied", "events_expired", "click_sum",
                  "click_n", "updated_at")


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot's version and counters, without its arrays."""

    version: int
    last_id: str
    events_applied: int
    events_expired: int
    click_sum: float
    click_n: int
    updated_at: str | None

    def debiased_reward(self, rho0: float, rho1: float) -> float | None:
        """The mean observed click over applied events corrected for click noise at the rates
        given, ``(mean f - rho0) / (1 - rho0 - rho1)`` clipped to [0, 1]; None before any.

        The raw clicks are kept, not ``h(f)``, so that the rates in force when it is read
        (the published estimate) apply to every event, also those applied before it.
        """
        return (calibrated_probability(self.click_sum / self.click_n, rho0, rho1)
                if self.click_n else None)


@dataclass(frozen=True)
class Snapshot:
    """A full snapshot: counters plus the learned arrays."""

    info: SnapshotInfo
    state: dict[str, np.ndarray]

    @property
    def version(self) -> int:
        return self.info.version


class PublishConflict(Exception):
    """The snapshot moved (or the lease was lost, or the model is gone) since the publisher
    read it: ``code`` is :attr:`~ScriptResult.MOVED`, :attr:`~ScriptResult.LEASE_LOST` or
    :attr:`~ScriptResult.GONE`."""

    def __init__(self, code: ScriptResult) -> None:
        super().__init__(_CONFLICTS.get(code, "unknown"))
        self.code = code


_CONFLICTS = {ScriptResult.MOVED: "version moved", ScriptResult.LEASE_LOST: "lease lost",
              ScriptResult.GONE: "model gone"}


def parse_info(values: Sequence[Any]) -> SnapshotInfo | None:
    """A :class:`SnapshotInfo` from an HMGET of :data:`COUNTER_FIELDS`."""
    version, last_id, applied, expired, click_sum, click_n, updated_at = values
    if version is None:
        return None
    return SnapshotInfo(int(version), text(last_id) or "0-0", int(applied or 0),
                        int(expired or 0), float(click_sum or 0.0), int(click_n or 0),
                        text(updated_at))


class SnapshotStore:
    """Load and publish snapshots."""

    def __init__(self, redis: aioredis.Redis, scripts: Scripts) -> None:
        self.redis = redis
        self.scripts = scripts

    async def info(self, mk: ModelKeys) -> SnapshotInfo | None:
        """Version and counters (no arrays)."""
        return parse_info(await self.redis.hmget(mk.snapshot, list(COUNTER_FIELDS)))

    async def version(self, mk: ModelKeys) -> int | None:
        """Current version, or None when the model is gone."""
        v = await self.redis.hget(mk.snapshot, "version")
        return int(v) if v is not None else None

    async def load(self, mk: ModelKeys) -> Snapshot | None:
        """The full snapshot, read in one round trip."""
        values: list[Any] = await self.redis.hmget(mk.snapshot, ["state", *COUNTER_FIELDS])
        info = parse_info(values[1:])
        if info is None or values[0] is None:
            return None
        return Snapshot(info, codec.decode(values[0]))

    async def publish(self, mk: ModelKeys, state: dict[str, np.ndarray], *,
                      expected_version: int | None = None, last_id: str | None = None,
                      applied: int = 0, click_sum: float = 0.0, click_n: int = 0,
                      lease_owner: str | None = None, logged: LoggedBatch | None = None,
                      retention: LogRetention | None = None) -> int:
        """Publish ``state`` atomically; return the new version.

        ``expected_version``: publish only if the snapshot is still at that
        version; ``last_id``: the newest stream id included in ``state``;
        ``lease_owner``: publish only while this owner holds the lease.
        Raises :class:`PublishConflict` otherwise.  ``logged``: the events
        applied in ``state``, added to the decision log in the same step
        (:mod:`app.store.decisionlog`), kept as ``retention`` says (default:
        :class:`~app.store.decisionlog.LogRetention`).
        """
        retention = retention or LogRetention()
        args: list[bytes | str | int | float] = [
            "" if expected_version is None else str(expected_version),
            codec.encode(state),
            last_id or "",
            int(applied), repr(float(click_sum)), int(click_n), utc_now(),
            lease_owner or "",
            int(retention.max_events), retention.min_ms(),
            *(logged.args() if logged is not None else [0]),
        ]
        reply: Any = await self.scripts.run(
            "publish_snapshot", [mk.snapshot, mk.lease, mk.log, mk.log_index, mk.stats], args)
        result = int(reply)
        if result < 0:
            raise PublishConflict(ScriptResult(result))
        return result
