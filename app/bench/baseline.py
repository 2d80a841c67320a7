"""The web-stack baseline of ``bench service``: a bare FastAPI endpoint doing one Redis GET.

Run as ``python -m app.bench.baseline --port P --redis-url URL [--workers N]``:
uvicorn with the event loop and HTTP parser the service uses (uvloop,
httptools), N processes as ``noisyloop api --workers N`` runs them
(:mod:`app.server.reuseport`), and one ``await redis.get(...)`` per
request.  The service's single-predict requests/s are reported as a ratio
of this endpoint's, measured in the same run by the same load generator.
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson
import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI
from fastapi.responses import Response

from app.server import reuseport

#: Where a worker process of ``--workers N`` finds the Redis URL.
REDIS_URL_ENV = "NOISYLOOP_BENCH_BASELINE_REDIS_URL"


def create_app(redis_url: str) -> FastAPI:
    app = FastAPI()
    client = aioredis.Redis.from_url(redis_url)

    @app.post("/get")
    async def get_value() -> Response:
        value = await client.get("noisyloop-bench-baseline")
        if isinstance(value, bytes):
            value = value.decode()
        return Response(orjson.dumps({"value": value}),
                        media_type="application/json")

    return app


def app_from_env() -> FastAPI:
    """The app of one uvicorn worker process (``--workers`` > 1)."""
    return create_app(os.environ[REDIS_URL_ENV])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    options = {"host": "127.0.0.1", "port": args.port, "log_config": None,
               "access_log": False, "loop": "uvloop", "http": "httptools"}
    if args.workers > 1:  # the process model of `noisyloop api --workers N`
        os.environ[REDIS_URL_ENV] = args.redis_url
        sys.exit(reuseport.serve("app.bench.baseline:app_from_env", args.workers, **options))
    uvicorn.run(create_app(args.redis_url), **options)


if __name__ == "__main__":
    main()
