"""The trainer's side of kept versions: after a publish, ask the store to keep the model's
version once its interval has passed (:mod:`app.store.versions`; a trainer hook,
:mod:`workers.hooks`).

The trainer publishes after every batch; asking Redis each time would add a
round trip to every batch, so each worker waits out the model's interval
itself first (the Lua step checks it again against the newest kept version,
which another worker or an explicit change may have kept meanwhile).  A
version published while the worker waits is remembered, and
:meth:`VersionKeeper.keep_due` (called after each trainer pass) keeps the
newest such version once the interval is up, whether or not the model still
learns: a burst shorter than the interval still leaves a kept version of its
end, at most one interval after it.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from app.store.keys import ModelKeys
from app.store.versions import VersionPolicy, VersionStore

if TYPE_CHECKING:
    from workers.context import ModelRef, ModelSlot, WorkerContext
    from workers.hooks import Published


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """Keep the published version if the model's interval is up (else remember it)."""
    await ctx.versions.published(ctx.store.versions, slot.ref, published.config,
                                 published.version)


async def after_pass(ctx: WorkerContext) -> None:
    """Keep the remembered version of every model whose interval is up."""
    await ctx.versions.keep_due(ctx.store.versions)


class VersionKeeper:
    """When this worker next asks the store to keep each model's version, and the newest
    version it published meanwhile."""

    def __init__(self) -> None:
        self._due: dict[ModelRef, float] = {}
        self._unkept: dict[ModelRef, tuple[VersionPolicy, int, bool]] = {}
        """Per model: the newest version published and not yet kept, with its policy and
        whether the store refused it once already."""

    async def published(self, store: VersionStore, ref: ModelRef, config: dict[str, Any],
                        version: int) -> None:
        """``version`` of ``ref`` was just published: keep it if the model's interval is up,
        else remember it for :meth:`keep_due`."""
        policy = VersionPolicy.of(config)
        if policy.kept == 0:
            return
        self._unkept[ref] = (policy, version, False)
        if time.monotonic() >= self._due.get(ref, -math.inf):
            await self._keep(store, ref)

    async def keep_due(self, store: VersionStore) -> None:
        """Keep the remembered version of every model whose interval is up."""
        now = time.monotonic()
        for ref in [r for r in self._unkept if now >= self._due.get(r, -math.inf)]:
            await self._keep(store, ref)

    async def _keep(self, store: VersionStore, ref: ModelRef) -> None:
        """Ask the store to keep the remembered version of ``ref``; the next ask waits out the
        interval (counted from the reply, so the store's own check has passed by then).  A
        version the store refuses (e.g. the newest kept version is an explicit change's,
        younger than the interval) is asked for once more, an interval later."""
        policy, version, refused_before = self._unkept.pop(ref)
        kept = await store.keep(ModelKeys(*ref), policy, expected_version=version)
        self._due[ref] = time.monotonic() + policy.interval_seconds
        if not kept and not refused_before:
            self._unkept[ref] = (policy, version, True)

    def forget(self, ref: ModelRef) -> None:
        """Drop what is known of ``ref`` (its lease is gone)."""
        self._due.pop(ref, None)
        self._unkept.pop(ref, None)
