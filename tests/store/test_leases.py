"""Trainer leases taken and renewed in bulk: one Lua step per chunk of models on one Redis."""

from __future__ import annotations

import redis

from app.store import ModelKeys, Store
from app.store.leases import TAKE_CHUNK, LeaseStore

#: Models of the test: more than one chunk.
MODELS = TAKE_CHUNK + 100


async def test_take_many_takes_renews_and_refuses_as_one_take_each(redis_url: str) -> None:
    store = Store.from_url(redis_url)
    try:
        mks = [ModelKeys("t", f"m{i}") for i in range(MODELS)]
        async with store.redis.pipeline(transaction=False) as pipe:
            for mk in mks[:-1]:  # the last model does not exist
                pipe.hset(mk.meta, "config", "{}")
            await pipe.execute()
        await store.redis.set(mks[0].lease, "other")
        leases = LeaseStore(store.redis)
        with redis.Redis.from_url(redis_url) as r:
            r.config_resetstat()
            taken = await leases.take_many(mks, "me", 10_000)
            steps = int(r.info("commandstats")["cmdstat_evalsha"]["calls"])
        assert steps == -(-MODELS // TAKE_CHUNK)  # one step per chunk, not per model
        assert taken == [False] + [True] * (MODELS - 2) + [False]
        assert await leases.take_many(mks[1:3], "me", 10_000) == [True, True]  # renewed
        assert await store.redis.get(mks[0].lease) == b"other"
        assert not await store.redis.exists(mks[-1].lease)  # no lease of a model gone
        assert 9_000 < await store.redis.pttl(mks[1].lease) <= 10_000
    finally:
        await store.close()
