"""What the service commands share: settings from flags, the data directory, Redis.

The data directory holds the embedded Redis files (``redis/``), the URL of a
running embedded Redis (``redis.url``, so ``noisyloop admin`` talks to the
server that ``serve`` started instead of starting a second one) and the
generated admin token (``admin_token``).  It is its owner's only: 0700, its
files 0600 (the embedded Redis has no password; only its owner may reach it).

redis-py, pydantic and the settings are imported inside the functions that
use them: every sub-command's ``register`` imports this module, and
``noisyloop replay`` needs none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.settings import Settings

ADMIN_TOKEN_FILE = "admin_token"
REDIS_URL_FILE = "redis.url"
REDIS_DIR = "redis"


def add_service_arguments(parser: argparse.ArgumentParser, *, http: bool = True,
                          embedded: bool = True) -> None:
    """Flags shared by the service commands (defaults come from Settings / environment);
    ``embedded``: without a Redis URL the command uses the embedded Redis of the data
    directory, else it needs one."""
    if http:
        parser.add_argument("--host", help="bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, help="HTTP port (default 8000)")
    if embedded:
        parser.add_argument("--data-dir", type=Path, help="data directory (default ./data)")
        parser.add_argument("--redis-url",
                            help="external Redis (default: REDIS_URL, else the embedded Redis "
                                 "of the data directory)")
    else:
        parser.add_argument("--redis-url",
                            help="Redis URL (required: this flag or REDIS_URL; `noisyloop "
                                 "serve` runs an embedded Redis)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by the given flags."""
    from app.settings import Settings

    overrides: dict[str, Any] = {}
    for name in ("host", "port", "data_dir", "redis_url"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How ``serve`` and ``api`` run uvicorn.

    uvloop's event loop and httptools' parser (C; both come with
    uvicorn[standard]; named, so a missing one fails at start-up instead of
    silently falling back to the pure-Python ones), on a transport that sends
    each response in one write (:mod:`app.commands.onewrite`); no access log
    of uvicorn's (the API logs each request itself); WebSocket messages up to
    the body limit.
    """
    from app.commands.onewrite import PROTOCOL

    return {"log_config": None, "access_log": False, "ws_max_size": settings.max_body_bytes,
            "loop": "uvloop", "http": PROTOCOL}


def ensure_admin_token(data_dir: Path) -> tuple[str, bool]:
    """The admin token stored in ``data_dir`` (created if missing); True when created now."""
    from app.store.embedded import make_private

    path = data_dir / ADMIN_TOKEN_FILE
    if path.is_file():
        return path.read_text("utf-8").strip(), False
    make_private(data_dir)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token, True


def with_admin_token(settings: Settings) -> tuple[Settings, str | None]:
    """Settings with an admin token (from data_dir if none is configured).

    Returns the new token too when it was generated just now (to print once).
    """
    from pydantic import SecretStr

    if settings.admin_token is not None:
        return settings, None
    token, created = ensure_admin_token(settings.data_dir)
    return (settings.model_copy(update={"admin_token": SecretStr(token)}),
            token if created else None)


def _answers(url: str) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1) as client:
            return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


@contextlib.contextmanager
def redis_for(settings: Settings, *, publish_url: bool = False) -> Iterator[str]:
    """The Redis URL to use: the configured one, the running embedded one, or a new one.

    A new embedded server is stopped on exit; with ``publish_url`` its URL is
    written to ``data_dir/redis.url`` while it runs.
    """
    from app.store.embedded import EmbeddedRedis, make_private

    if settings.redis_url is not None:
        yield settings.redis_url
        return
    url_file = settings.data_dir / REDIS_URL_FILE
    if url_file.is_file():
        running = url_file.read_text("utf-8").strip()
        if _answers(running):
            if publish_url:
                raise RuntimeError(f"an embedded Redis for {settings.data_dir} already runs at "
                                   f"{running} (is another `noisyloop serve` running?)")
            yield running
            return
    make_private(settings.data_dir)
    with EmbeddedRedis(settings.data_dir / REDIS_DIR) as server:
        if publish_url:
            url_file.write_text(server.url + "\n", "utf-8")
            url_file.chmod(0o600)
        try:
            yield server.url
        finally:
            if publish_url:
                url_file.unlink(missing_ok=True)
