"""The trainer's side of kept versions: after a publish, ask the store to keep the model's
version once its interval has passed (:mod:`app.store.versions`; a trainer hook,
:mod:`workers.hooks`).

The trainer publishes after every batch; asking Redis each time would add a
round trip to every batch, so each worker waits out the model's interval
itself first (the Lua step checks it again against the newest kept version,
which another worker or an explicit change may have kept meanwhile).  A
version published while the worker waits is remembered in the model's slot
(:class:`Unkept`), and :func:`after_pass` (after each trainer pass) keeps the
newest such version once the interval is up, whether or not the model still
learns: a burst shorter than the interval still leaves a kept version of its
end, at most one interval after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.store.keys import ModelKeys
from app.store.versions import VersionPolicy, VersionStore

if TYPE_CHECKING:
    from workers.context import ModelSlot, WorkerContext
    from workers.hooks import Published


@dataclass(frozen=True)
class Unkept:
    """The newest version of a model published and not yet kept."""

    policy: VersionPolicy
    version: int
    refused_before: bool = False
    """Whether the store refused to keep it once already."""


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """The published version: kept if the model's interval is up, else remembered for
    :func:`after_pass`."""
    policy = VersionPolicy.of(published.config)
    if policy.kept == 0:
        return
    slot.unkept = Unkept(policy, published.version)
    if time.monotonic() >= slot.keep_due:
        await _keep(ctx.store.versions, slot)


async def after_pass(ctx: WorkerContext) -> None:
    """Keep the remembered version of every held model whose interval is up."""
    now = time.monotonic()
    for slot in [s for s in ctx.slots.values() if s.unkept is not None and now >= s.keep_due]:
        await _keep(ctx.store.versions, slot)


async def _keep(store: VersionStore, slot: ModelSlot) -> None:
    """Ask the store to keep the slot's remembered version; the next ask waits out the
    interval (counted from the reply, so the store's own check has passed by then).  A
    version the store refuses (e.g. the newest kept version is an explicit change's,
    younger than the interval) is asked for once more, an interval later."""
    unkept, slot.unkept = slot.unkept, None
    if unkept is None:
        return
    kept = await store.keep(ModelKeys(*slot.ref), unkept.policy, expected_version=unkept.version)
    slot.keep_due = time.monotonic() + unkept.policy.interval_seconds
    if not kept and not unkept.refused_before:
        slot.unkept = Unkept(unkept.policy, unkept.version, True)
