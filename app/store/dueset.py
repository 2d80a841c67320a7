"""Due sets: which models a background role must look at, and from when.

A due set is one sorted set across models, member ``"tenant/model"``, scored by the time
from which the model needs a look; a pass of the role reads only the members due now, so
idle models cost it nothing.  Two exist (:mod:`app.store.keys`):

- :data:`~app.store.keys.SWEEP_DUE` (the sweeper): scored by the Redis time from which the
  model's earliest pending deadline has passed.  The Lua steps that add a deadline to a
  model's pending set say when it became the model's earliest (``record_decisions.lua``,
  ``activate_decision.lua``) and the caller then lowers the model's score
  (:meth:`DueSet.lower`, ``ZADD LT``): no cross-slot step.  After a pass over a model,
  :meth:`DueSet.reschedule` sets its score to its earliest remaining deadline (removes it
  when none) and reads the pending set again: a deadline added meanwhile is either seen by
  that read or lowered by its own caller afterwards, so none is left unscheduled.
- :data:`~app.store.keys.NOISE_DUE` (the jobs role's periodic noise estimates): scored by
  the Unix time of the model's next look; the trainer lowers it to now when it adds samples
  or anchor rows (:class:`app.store.nrest.SampleStore`, :class:`~app.store.nrest.AnchorStore`);
  the jobs role's rescheduling reads the counts again and makes a model due now when they
  reached its threshold meanwhile (its ``ZADD`` may have overwritten that lowering).

:meth:`DueSet.seed` puts every model back once (a worker's start, and every so often), in
case a writer died between its step and its ``ZADD``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis

from app.store import keys
from app.store.keys import ModelKeys
from app.store.util import text


def _ref(mk: ModelKeys) -> str:
    return keys.model_ref(mk.tenant, mk.model)


class DueSet:
    """One due set (module docstring) on the sorted set ``key``."""

    def __init__(self, redis: aioredis.Redis, key: str) -> None:
        self.redis = redis
        self.key = key

    async def due(self, now: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` models due at ``now``, the longest due first."""
        refs: Any = await self.redis.zrangebyscore(self.key, "-inf", now, start=0, num=limit)
        return [keys.split_model_ref(text(r) or "") for r in refs]

    async def lower(self, mk: ModelKeys, at: float) -> None:
        """Make ``mk`` due no later than ``at``."""
        await self.redis.zadd(self.key, {_ref(mk): at}, lt=True)

    async def reschedule(self, mk: ModelKeys, next_at: Callable[[], Awaitable[float | None]],
                         ) -> None:
        """After a pass over ``mk``: due at ``next_at()`` (None: off the set), then
        ``next_at()`` read again and the score lowered to it (module docstring: a writer
        that raced the first read lowers the score itself or is seen by the second)."""
        at = await next_at()
        if at is None:
            await self.redis.zrem(self.key, _ref(mk))
        else:
            await self.redis.zadd(self.key, {_ref(mk): at})
        again = await next_at()
        if again is not None and (at is None or again < at):
            await self.lower(mk, again)

    async def forget(self, mk: ModelKeys) -> None:
        """Take a model (gone) off the set."""
        await self.redis.zrem(self.key, _ref(mk))

    async def seed(self, models: Sequence[tuple[str, str]]) -> None:
        """Make each of ``models`` due now (looked at once, then rescheduled)."""
        if models:
            await self.redis.zadd(self.key, {keys.model_ref(*ref): 0 for ref in models},
                                  lt=True)


async def earliest_deadline(redis: aioredis.Redis, mk: ModelKeys) -> float | None:
    """When ``mk``'s earliest pending decision is due to the sweeper (a decision ends once the
    Redis clock's whole seconds pass its deadline); None when none is pending."""
    first: Any = await redis.zrange(mk.pending, 0, 0, withscores=True)
    return float(first[0][1]) + 1 if first else None
