"""How ``noisyloop serve`` and ``noisyloop api`` run uvicorn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.server.onewrite import PROTOCOL

if TYPE_CHECKING:
    from app.settings import Settings


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of :func:`uvicorn.run` / :class:`uvicorn.Config` for ``settings``.

    uvloop's event loop and httptools' parser (C; both come with
    uvicorn[standard]; named, so a missing one fails at start-up instead of
    silently falling back to the pure-Python ones), on a transport that sends
    each response in one write (:mod:`app.server.onewrite`); no access log
    of uvicorn's (the API logs each request itself); WebSocket messages up to
    the body limit.
    """
    return {"log_config": None, "access_log": False, "ws_max_size": settings.max_body_bytes,
            "loop": "uvloop", "http": PROTOCOL}

