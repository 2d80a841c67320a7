"""Decisions' deadlines passed without waiting for them.

Deadlines are whole seconds of Redis's clock (``TIME`` + ``wait_seconds``, at
least 1 s), so a decision becomes due 1 to 2 s after it was logged.  Instead of
sleeping through that, a test moves the model's deadlines back: to the Lua
steps (``take_feedback``, ``expire_decision``) and the sweeper (the model is made due
on its due set), the decisions are then overdue exactly as if the time had
passed.  Contexts keep their expiry (``wait_seconds`` + the grace period),
which tests of short waits never reach.
"""

from __future__ import annotations

import redis
import redis.asyncio

from app.store.keys import SWEEP_DUE, ModelKeys, model_ref

#: How far back the deadlines move: past a 1 s wait and the clock's whole second.
PAST = 3.0


def pass_deadlines(r: redis.Redis, mk: ModelKeys, seconds: float = PAST) -> int:
    """Move every deadline of ``mk``'s pending decisions ``seconds`` back; how many moved."""
    scores = r.zrange(mk.pending, 0, -1, withscores=True)
    if scores:
        r.zadd(mk.pending, {member: score - seconds for member, score in scores}, xx=True)
        r.zadd(SWEEP_DUE, {model_ref(mk.tenant, mk.model): 0}, lt=True)
    return len(scores)


async def pass_deadlines_async(r: redis.asyncio.Redis, mk: ModelKeys,
                               seconds: float = PAST) -> int:
    """:func:`pass_deadlines` on an asyncio client."""
    scores = await r.zrange(mk.pending, 0, -1, withscores=True)
    if scores:
        await r.zadd(mk.pending, {member: score - seconds for member, score in scores}, xx=True)
        await r.zadd(SWEEP_DUE, {model_ref(mk.tenant, mk.model): 0}, lt=True)
    return len(scores)
