"""Kept versions of a model: copies of published snapshots to roll back to.

The trainer publishes a snapshot after every batch, possibly hundreds a
second, so not every published version is kept: :meth:`VersionStore.keep`
copies the current snapshot's state and the model's config (inside Redis,
one Lua step) when the newest kept version is at least the model's interval
old, or at once for an explicit change (create: ``interval`` 0).  Reset,
import, rollback and promote keep their version in the step that publishes it,
rollback and promote also the state they replace (``before rollback``,
``before promote``: either can be undone).  The oldest kept versions beyond the
model's limit go in the same step.  Memory: up to ``kept`` copies of the state (and config) per
model.

:meth:`VersionStore.rollback` publishes a kept state as a new version, with
the algorithm and params it was kept under, and adds its ``rollback`` marker
to the decision log in the same step (so no trainer batch of the new version
is logged before it); the applied stream id and the counters stay, so the
events queued meanwhile apply on top of it, once (a trainer that learned a
batch on the replaced state has its publish refused and learns the batch
again).  :meth:`VersionStore.publish` publishes the state of another explicit
change (reset, import) with its marker likewise.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store import codec
from app.store.client import lua_source, run_script
from app.store.keys import ModelKeys
from app.store.results import ScriptResult
from app.store.snapshots import PublishConflict
from app.store.util import text, utc_now

#: Versions kept per model unless its config says otherwise.
DEFAULT_KEPT = 20
#: Seconds between two versions the trainer keeps, unless the model's config says otherwise.
DEFAULT_INTERVAL_SECONDS = 60.0
#: Config fields a kept version restores on rollback (a promote may have changed them).
RESTORED_CONFIG_FIELDS = ("algorithm", "params")
#: Kept versions per read of :meth:`VersionStore.newest`.
VERSIONS_PER_READ = 20


@dataclass(frozen=True)
class VersionPolicy:
    """How many versions a model keeps and how often the trainer keeps one."""

    kept: int = DEFAULT_KEPT
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS

    @classmethod
    def of(cls, config: ModelConfig) -> VersionPolicy:
        """The policy in a model's config (``versions``; the defaults when absent)."""
        given = config.versions
        return cls(int(DEFAULT_KEPT if given.kept is None else given.kept),
                   float(DEFAULT_INTERVAL_SECONDS if given.interval_seconds is None
                         else given.interval_seconds))


@dataclass(frozen=True)
class KeptVersion:
    """One kept version's metadata."""

    version: int
    created_at: str | None
    """When the version was published."""
    events_applied: int
    """Events the model had applied when the version was published."""
    kept_at: float
    """When it was kept (Redis clock, seconds since the epoch)."""
    reason: str
    """``trainer``, or the explicit change that published it (``create``, ``reset``,
    ``import``, ``rollback``, ``promote``), or ``before rollback`` / ``before promote``
    (the state the change replaced)."""


class RollbackRefused(Exception):
    """The version is not kept (``code`` :attr:`~ScriptResult.NOT_KEPT`), the config changed
    meanwhile (:attr:`~ScriptResult.MOVED`) or the model is gone
    (:attr:`~ScriptResult.GONE`)."""

    def __init__(self, code: ScriptResult) -> None:
        super().__init__(_REFUSALS.get(code, "unknown"))
        self.code = code


_REFUSALS = {ScriptResult.NOT_KEPT: "version not kept", ScriptResult.MOVED: "config changed",
             ScriptResult.GONE: "model gone"}


class VersionStore:
    """Keep, list and restore a model's versions."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._keep = redis.register_script(lua_source("keep_version"))
        self._rollback = redis.register_script(lua_source("rollback_version"))
        self._publish = redis.register_script(lua_source("publish_explicit"))

    async def keep(self, mk: ModelKeys, policy: VersionPolicy, *, reason: str = "trainer",
                   interval: float | None = None, expected_version: int | None = None) -> int:
        """Keep the current snapshot if the newest kept version is older than ``interval``
        (default: the policy's; 0 for an explicit change) and, when given, the snapshot is
        at ``expected_version``; returns the version kept, 0 when none was."""
        wait = policy.interval_seconds if interval is None else interval
        reply: Any = await run_script(
            self._keep, [mk.snapshot, mk.meta, mk.versions, mk.version_states],
            [repr(float(wait)), policy.kept,
             "" if expected_version is None else str(expected_version), reason])
        return int(reply)

    async def publish(self, mk: ModelKeys, state: dict[str, np.ndarray], expected_version: int,
                      policy: VersionPolicy, reason: str, marker: str = "",
                      detail: dict[str, Any] | None = None) -> int:
        """Publish ``state`` of an explicit change (``reason``) as the new version while the
        snapshot is at ``expected_version``, kept (as ``policy`` allows) and with the
        decision-log marker ``marker`` (``detail`` plus the new ``version``; "" = none) in
        the same step; returns the version.  Raises
        :class:`~app.store.snapshots.PublishConflict` (``MOVED``: the version moved,
        ``GONE``: the model is gone)."""
        reply: Any = await run_script(
            self._publish, [mk.snapshot, mk.meta, mk.log, mk.versions, mk.version_states],
            [str(expected_version), codec.encode(state), utc_now(), marker,
             orjson.dumps(detail or {}), policy.kept, reason])
        result = int(reply)
        if result < 0:
            raise PublishConflict(ScriptResult(result))
        return result

    async def kept(self, mk: ModelKeys) -> list[KeptVersion]:
        """The kept versions, newest first."""
        members: Any = await self.redis.zrange(mk.versions, 0, -1, desc=True)
        return [_parse(m) for m in members]

    async def newest(self, mk: ModelKeys, before: int | None = None
                     ) -> AsyncGenerator[KeptVersion, None]:
        """The kept versions older than ``before`` (None: all), newest first, read
        :data:`VERSIONS_PER_READ` at a time (the sorted set's score is the version)."""
        high = "+inf" if before is None else f"({before}"
        while True:
            members: Any = await self.redis.zrevrangebyscore(
                mk.versions, high, "-inf", start=0, num=VERSIONS_PER_READ)
            for member in members:
                kept = _parse(member)
                yield kept
                high = f"({kept.version}"
            if len(members) < VERSIONS_PER_READ:
                return

    async def rollback(self, mk: ModelKeys, version: int) -> int:
        """Publish kept ``version`` (state, algorithm and params) as a new version, marked in
        the decision log (``version``, ``rolled_back_to``, ``algorithm``) and kept with the
        state it replaces (see the module docstring); returns it.  Raises
        :class:`RollbackRefused`."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(mk.meta, "config")
            pipe.hget(mk.version_states, f"c:{version}")
            current, kept = await pipe.execute()
        if current is None:
            raise RollbackRefused(ScriptResult.GONE)
        if kept is None:
            raise RollbackRefused(ScriptResult.NOT_KEPT)
        now, then = ModelConfig.from_json(current), ModelConfig.from_json(kept)
        restored = now.updated(**{name: getattr(then, name) for name in RESTORED_CONFIG_FIELDS})
        marker = {"rolled_back_to": version, "algorithm": restored.algorithm}
        changed = restored.as_dict() != now.as_dict()
        args: list[bytes | str | int | float] = [
            str(version), utc_now(), current, restored.to_json() if changed else "",
            orjson.dumps(marker), VersionPolicy.of(now).kept]
        reply: Any = await run_script(
            self._rollback, [mk.snapshot, mk.meta, mk.version_states, mk.log, mk.versions], args)
        result = int(reply)
        if result < 0:
            raise RollbackRefused(ScriptResult(result))
        return result


def _parse(member: bytes | str) -> KeptVersion:
    meta = orjson.loads(member)
    return KeptVersion(int(meta["version"]), text(meta.get("created_at") or None),
                       int(meta.get("events_applied") or 0), float(meta["kept_at"]),
                       str(meta.get("reason") or "trainer"))
