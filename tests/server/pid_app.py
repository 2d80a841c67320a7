"""ASGI apps for the worker-supervisor tests: one answers with its process id, one cannot start."""

from __future__ import annotations

import os
from typing import Any


def create() -> Any:
    """An app whose every HTTP answer is the id of the process that served it."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = str(os.getpid()).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return app


def broken() -> Any:
    """A factory that fails, as a create_app with an unreachable dependency would."""
    raise RuntimeError("this app cannot start")
