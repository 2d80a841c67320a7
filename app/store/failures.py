"""The trainer's failures on a model, kept in the model's stats hash for its owner to see.

When the trainer's step on a model raises (a corrupt snapshot, a script
error, a learner that times out), the model's events stay pending and the
step is retried later; meanwhile the model's stats say why (``GET
/v1/models/{id}``, and a ``sync`` that times out): the last error, the time of
the first of the consecutive failures and their count.  The next step that
succeeds removes the record (with its batch marked handled,
:meth:`app.store.delivery.DeliveryStore.ack_and_trim`); a step that publishes
and then fails (an after-publish hook) keeps and counts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from app.store.client import lua_source
from app.store.keys import ModelKeys
from app.store.util import text, utc_now

#: Fields of the stats hash (as ``trainer_failure.lua`` writes them): the last error, when
#: the failures began, failed steps since.
FAILURE_FIELDS = ("trainer_error", "trainer_error_since", "trainer_failed_steps")
#: Longest error text kept.
MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class TrainerFailure:
    """Why the trainer fails on a model, since when, and how many steps failed since."""

    error: str
    since: str
    failed_steps: int


def parse_failure(values: Sequence[Any]) -> TrainerFailure | None:
    """A :class:`TrainerFailure` from an HMGET of :data:`FAILURE_FIELDS` (None: none)."""
    error, since, steps = values
    if error is None:
        return None
    return TrainerFailure(text(error) or "", text(since) or "", int(steps or 0))


class FailureStore:
    """Record, clear and read the trainer's failure of a model."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._report = redis.register_script(lua_source("trainer_failure"))

    async def report(self, mk: ModelKeys, error: str) -> None:
        """Record one failed step (only while the model exists)."""
        await self._report(keys=[mk.meta, mk.stats], args=[error[:MAX_ERROR_CHARS], utc_now()])

    async def clear(self, mk: ModelKeys) -> None:
        """The model's steps succeed (again)."""
        await self.redis.hdel(mk.stats, *FAILURE_FIELDS)

    async def read(self, mk: ModelKeys) -> TrainerFailure | None:
        return parse_failure(await self.redis.hmget(mk.stats, list(FAILURE_FIELDS)))
