"""The web-stack baseline of ``bench service``: a bare FastAPI endpoint doing one Redis GET.

Run as ``python -m app.bench.baseline --port P --redis-url URL``: uvicorn,
one worker, the same event loop and HTTP parser the service uses, and one
``await redis.get(...)`` per request.  The service's single-predict
requests/s are reported as a ratio of this endpoint's, measured in the same
run by the same load generator.
"""

from __future__ import annotations

import argparse

import orjson
import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI
from fastapi.responses import Response


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--redis-url", required=True)
    args = ap.parse_args()
    uvicorn.run(create_app(args.redis_url), host="127.0.0.1", port=args.port, log_config=None,
                access_log=False)


if __name__ == "__main__":
    main()
