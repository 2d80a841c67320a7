"""Two upkeep figures of the store: a start on a slow-loading AOF, and a delete on a full Redis.

``aof``: an AOF of ``--keys`` values of 32 KB is written (rewritten in RDB
form), then loaded by a new embedded server with Redis's ``key-load-delay``
so that loading takes ``keys x delay`` (2,000 x 30 ms = 60 s by default);
the start uses its default timeout (20 s) and must wait the load out.

``delete``: a model with ``--answered`` answered decisions (their context
tombstones stay until their expiry) in a Redis that holds ``--others``
other keys; the figure is the time of ``ModelStore.delete`` and the keys of
the model left after it.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_store_upkeep.py aof
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_store_upkeep.py delete
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import ModelKeys, Store
from app.store.embedded import EmbeddedRedis


def aof_start(keys: int, delay_us: int) -> dict[str, float]:
    """Seconds a start waits for an AOF whose loading takes ``keys x delay_us``."""
    with tempfile.TemporaryDirectory() as tmp:
        with EmbeddedRedis(Path(tmp)) as server, redis.Redis.from_url(server.url) as client:
            for start in range(0, keys, 100):
                client.mset({f"k{i}": b"x" * 32_768 for i in range(start, min(keys, start + 100))})
            client.bgrewriteaof()
            while client.info("persistence")["aof_rewrite_in_progress"] or \
                    client.info("persistence")["aof_rewrite_scheduled"]:
                time.sleep(0.1)
        server = EmbeddedRedis(Path(tmp), options=["--key-load-delay", str(delay_us)])
        began = time.monotonic()
        server.start()
        try:
            with redis.Redis.from_url(server.url) as client:
                loaded = client.dbsize()
        finally:
            server.stop()
        return {"keys": keys, "loaded": loaded, "load_floor_s": keys * delay_us / 1e6,
                "start_s": round(time.monotonic() - began, 1)}


async def delete(answered: int, others: int) -> dict[str, float]:
    """Seconds of a model's delete and its keys left, in a Redis of ``others`` more keys."""
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(Path(tmp), appendonly=False) as srv:
        store = Store.from_url(srv.url, socket_timeout=30)
        config = ModelConfig.of({
            "model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 2,
            "n_classes": 3, "params": {}, "seed": 0, "uid": "m",
            "feedback": {"wait_seconds": 3600, "on_timeout": "drop"}})
        await store.tenants.create("t")
        await store.models.create("t", config, build_learner(config).get_state(), 0.0, 0.0)
        mk = ModelKeys("t", "m")
        ctx = {"x": np.ones(2), "greedy": np.array(0), "played": np.array(1),
               "prob": np.array(0.5)}
        for start in range(0, answered, 1000):
            ids = [f"e{i}" for i in range(start, min(answered, start + 1000))]
            await store.events.record_decisions(mk, [(e, ctx) for e in ids], 3600, 3600)
            await store.events.take_feedback_many(mk, [(e, {"click": np.array(1.0)})
                                                       for e in ids])
        with redis.Redis.from_url(srv.url) as client:
            with client.pipeline(transaction=False) as pipe:
                for i in range(others):
                    pipe.set(ModelKeys("other", f"m{i % 50}").context(str(i)), b"x" * 10)
                pipe.execute()
            began = time.monotonic()
            await store.models.delete("t", "m")
            seconds = time.monotonic() - began
            left = sum(1 for _ in client.scan_iter(match=mk.pattern, count=10_000))
        await store.close()
        return {"answered": answered, "other_keys": others, "delete_s": round(seconds, 2),
                "keys_left": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=("aof", "delete"))
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--delay-us", type=int, default=30_000)
    parser.add_argument("--answered", type=int, default=20_000)
    parser.add_argument("--others", type=int, default=200_000)
    args = parser.parse_args()
    result = (aof_start(args.keys, args.delay_us) if args.figure == "aof"
              else asyncio.run(delete(args.answered, args.others)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
