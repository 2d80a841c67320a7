"""The trainer's side of kept versions: after a publish, ask the store to keep the model's
version once its interval has passed (:mod:`app.store.versions`; a trainer feature,
:mod:`workers.feature`).

The trainer publishes after every batch; asking Redis each time would add a
round trip to every batch, so each worker waits out the model's interval itself
first (the Lua step checks it again against the newest kept version, which
another worker or an explicit change may have kept meanwhile).  A version
published while the worker waits is remembered in the feature's state of the
model (:class:`Keeping`, in its slot: :mod:`workers.feature`), and
:func:`after_pass` (after each trainer pass) keeps the newest such version once
the interval is up, whether or not the model still learns.  A model that went
idle (nothing published for :data:`IDLE_SECONDS`) has its remembered version
kept at once, whatever the interval, so that the end of a burst is listed (and
can be rolled back to) seconds after it, not up to an interval later; at most
one such early keep per model and interval, so a model fed a trickle keeps at
most twice the versions of its interval.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from app.store.keys import ModelKeys
from app.store.versions import VersionPolicy, VersionStore
from workers import ModelRef
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published

#: Seconds without a publish after which a model counts as idle and its newest version is
#: kept at once (a pass's reads of a busy model are at most ``idle_interval`` apart, 0.5 s
#: by default, so a learning model is never taken for idle).
IDLE_SECONDS = 5.0


@dataclass(frozen=True)
class Unkept:
    """The newest version of a model published and not yet kept."""

    policy: VersionPolicy
    version: int
    refused_before: bool = False
    """Whether the store refused to keep it once already."""


@dataclass
class Keeping:
    """What this trainer remembers of one model's kept versions (the feature's state)."""

    unkept: Unkept | None = None
    """Its newest version published and not yet kept."""
    keep_due: float = -math.inf
    """``time.monotonic()`` before which its version is not kept."""
    published_at: float = -math.inf
    """``time.monotonic()`` of its newest publish here (how long it has been idle)."""
    idle_keep_due: float = -math.inf
    """``time.monotonic()`` before which it is not kept early again for going idle."""


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """The published version: kept if the model's interval is up, else remembered for
    :func:`after_pass`."""
    policy = VersionPolicy.of(published.config)
    if policy.kept == 0:
        return
    keeping = FEATURE.state(slot)
    keeping.unkept = Unkept(policy, published.version)
    keeping.published_at = time.monotonic()
    if keeping.published_at >= keeping.keep_due:
        await _keep(ctx.store.versions, slot.ref, keeping)


async def after_pass(ctx: WorkerContext) -> None:
    """Keep the remembered version of every held model whose interval is up, and of every
    model gone idle (at most once an interval)."""
    now = time.monotonic()
    for slot in list(ctx.slots.values()):
        keeping = FEATURE.state(slot)
        if keeping.unkept is None:
            continue
        if now >= keeping.keep_due:
            await _keep(ctx.store.versions, slot.ref, keeping)
        elif now - keeping.published_at >= IDLE_SECONDS and now >= keeping.idle_keep_due:
            keeping.idle_keep_due = now + keeping.unkept.policy.interval_seconds
            await _keep(ctx.store.versions, slot.ref, keeping, interval=0.0)


async def _keep(store: VersionStore, ref: ModelRef, keeping: Keeping,
                interval: float | None = None) -> None:
    """Ask the store to keep the model's remembered version (with ``interval`` 0: whatever
    the age of the newest kept version); the next ask waits out the interval (counted
    from the reply, so the store's own check has passed by then).  A version the store
    refuses (e.g. the newest kept version is an explicit change's, younger than the
    interval) is asked for once more, an interval later."""
    unkept, keeping.unkept = keeping.unkept, None
    if unkept is None:
        return
    kept = await store.keep(ModelKeys(*ref), unkept.policy, interval=interval,
                            expected_version=unkept.version)
    keeping.keep_due = time.monotonic() + unkept.policy.interval_seconds
    if not kept and not unkept.refused_before:
        keeping.unkept = Unkept(unkept.policy, unkept.version, True)


FEATURE = Feature("versions", state_factory=Keeping, after_publish=after_publish,
                  after_pass=after_pass)
