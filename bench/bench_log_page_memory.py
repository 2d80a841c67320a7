"""Memory of serving one decision-log page, streamed and kept whole, against its size.

Writes a log of ``N`` events of a model with ``n_features`` 100,000 whose
contexts have one non-zero each (stored sparse, as the service stores them;
batch entries of 1,000 events, as the trainer publishes them) on an embedded
redis-server, then reads pages of ``L`` lines with
:func:`app.api.decisionlog.read_page` and consumes their body (the bytes the
server would send, counted and dropped).  For each page size, prints the
page's bytes, the peak of Python's allocations while it was read and sent
(``tracemalloc``) and the wall time: streamed (the service: a page past
``BUFFERED_PAGE_BYTES`` is read twice and sent a chunk at a time) and kept
whole (the reference of the same run: ``BUFFERED_PAGE_BYTES`` raised past the
page, which then is held whole before it is sent).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_log_page_memory.py 10000
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from app.api import decisionlog
from app.store import codec
from app.store.decisionlog import DecisionLogStore, LoggedBatch
from app.store.embedded import EmbeddedRedis
from app.store.keys import ModelKeys

#: The acceptance case's width, and the events of one logged batch.
N_FEATURES = 100_000
BATCH = 1000
MK = ModelKeys("acme", "wide")


async def write_log(r: aioredis.Redis, n: int) -> None:
    """``n`` logged events in entries of :data:`BATCH`, each context one non-zero."""
    for start in range(0, n, BATCH):
        rows = range(start, min(n, start + BATCH))
        contexts = []
        for i in rows:
            x = np.zeros(N_FEATURES)
            x[(7919 * i) % N_FEATURES] = 1.0
            contexts.append({"x": x, "played": np.int64(i % 3), "prob": np.float64(1 / 3),
                             "greedy": np.int64(0)})
        blobs = codec.encode_many(contexts)
        feedback = codec.encode_many([{"click": np.float64(i % 2)} for i in rows])
        batch = LoggedBatch.pack([[f"{1000 + i}-0" for i in rows], ["feedback"] * len(rows),
                                  [f"e{i}" for i in rows], blobs, feedback])
        await r.xadd(MK.log, {"k": "events", "v": 1, "n": batch.n, "L": batch.lengths,
                              **dict(zip(("s", "t", "e", "c", "f"), batch.columns,
                                         strict=True))})


async def serve_page(log: DecisionLogStore, limit: int) -> tuple[int, float, float]:
    """Read one page of ``limit`` lines and consume its body: its bytes, the peak of the
    allocations meanwhile (MB) and the seconds taken."""
    tracemalloc.start()
    start = time.perf_counter()
    page = await decisionlog.read_page(log, MK, since_ms=None, until_ms=None, after=None,
                                       limit=limit)
    sent = 0
    if isinstance(page.body, bytes):
        sent = len(page.body)
    else:
        async for chunk in page.body:
            sent += len(chunk)
    seconds = time.perf_counter() - start
    del page
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return sent, peak, seconds


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedRedis(Path(tmp), appendonly=False) as server:
        r = aioredis.Redis.from_url(server.url)
        await write_log(r, n)
        log = DecisionLogStore(r)
        # None: code from before the streamed page (run from another checkout), built whole
        buffered = getattr(decisionlog, "BUFFERED_PAGE_BYTES", None)
        print(f"log of {n:,} events, n_features {N_FEATURES:,}, one non-zero each, entries of "
              f"{BATCH:,}; BUFFERED_PAGE_BYTES {buffered}")
        for limit in (100, 1000, 4000, 10_000):
            if limit > n:
                break
            out = []
            ways = (("streamed", buffered), ("kept whole", 2**40)) if buffered is not None \
                else (("built whole", None),)
            for name, keep in ways:
                if keep is not None:
                    decisionlog.BUFFERED_PAGE_BYTES = keep
                sent, peak, seconds = await serve_page(log, limit)
                out.append(f"{name}: peak {peak:,.1f} MB ({peak * 1e6 / sent:.2f}x the "
                           f"page), {seconds:.2f} s")
            if buffered is not None:
                decisionlog.BUFFERED_PAGE_BYTES = buffered
            print(f"  page of {limit:,} lines, {sent:,} B: " + "; ".join(out))
        await r.aclose()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
