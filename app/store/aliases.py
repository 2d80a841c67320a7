"""Decisions known by a client's own event id (the compatibility routes' ``eventId``).

``nl:{T:M}:alias:E`` holds, for the client's event id ``E``, the service's event id of the
decision and the id of the action it chose (a multi-slot decision: also each slot's id and
action), for as long as the decision can still take feedback.  :meth:`AliasStore.claim`
takes an id once (a second claim of the same id fails while the first lives), before the
decision is made, so that a duplicate id is refused without anything logged;
:meth:`AliasStore.bind` then records what was decided.  :meth:`AliasStore.keep_reward`
keeps each reward sent before a deferred decision is activated (the rewards by action id,
in order, ``nl:{T:M}:alias-rewards:E``), and :meth:`AliasStore.take_rewards` takes them all
at once, so that whoever takes them (the activation, or the reward that finds the decision
activated meanwhile) learns each exactly once.  Both keys are on the
model's expiring-key index, so that a model delete removes them without a scan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson
import redis.asyncio as aioredis

from app.store.jobs import index_expiring
from app.store.keys import ModelKeys


@dataclass(frozen=True, slots=True)
class Alias:
    """The service's event id of a decision and the action it chose (slot 0's), and for a
    multi-slot decision each slot's id and action, in slot order."""

    event_id: str
    action_id: str
    slots: tuple[tuple[str, str], ...] = ()


class AliasStore:
    """Client event ids -> the decisions they name."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def claim(self, mk: ModelKeys, alias: str, ttl_seconds: int) -> bool:
        """Take ``alias`` for a decision about to be made; False if it is taken."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(mk.alias(alias), b"", nx=True, ex=ttl_seconds)
            index_expiring(pipe, mk, mk.alias(alias), ttl_seconds)
            taken, *_ = await pipe.execute()
        return bool(taken)

    async def bind(self, mk: ModelKeys, alias: str, found: Alias, ttl_seconds: int) -> None:
        """Record the decision a claimed (or a service-made) ``alias`` names."""
        await self._redis.set(mk.alias(alias), orjson.dumps(
            [found.event_id, found.action_id, [list(slot) for slot in found.slots]]),
            ex=ttl_seconds)

    async def release(self, mk: ModelKeys, alias: str) -> None:
        """Give back a claim whose decision was refused (nothing was logged)."""
        await self._redis.delete(mk.alias(alias))

    async def resolve(self, mk: ModelKeys, alias: str) -> Alias | None:
        """The decision ``alias`` names; None if unknown, expired or not decided yet."""
        raw = await self._redis.get(mk.alias(alias))
        if not raw:
            return None
        event_id, action_id, slots = orjson.loads(raw)
        return Alias(str(event_id), str(action_id),
                     tuple((str(slot), str(action)) for slot, action in slots))

    async def keep_reward(self, mk: ModelKeys, alias: str, rewards: Mapping[str, float],
                          ttl_seconds: int) -> int:
        """Keep a reward (by action id) of a decision not activated yet, after those kept
        before; how many are kept now."""
        key = mk.alias_rewards(alias)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.rpush(key, orjson.dumps(dict(rewards)))
            pipe.expire(key, ttl_seconds)
            index_expiring(pipe, mk, key, ttl_seconds)
            kept, *_ = await pipe.execute()
        return int(kept)

    async def take_rewards(self, mk: ModelKeys, alias: str) -> list[dict[str, float]]:
        """Take every reward kept for ``alias``, in the order they came (none are left for
        another caller)."""
        key = mk.alias_rewards(alias)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lrange(key, 0, -1)
            pipe.delete(key)
            raw, _ = await pipe.execute()
        return [{str(k): float(v) for k, v in orjson.loads(r).items()} for r in raw]
