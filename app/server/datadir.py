"""The data directory of a running service: the embedded Redis and the admin token.

The data directory holds the embedded Redis files (``redis/``), the URL of a
running embedded Redis (``redis.url``, so ``noisyloop admin`` talks to the
server that ``serve`` started instead of starting a second one) and the
generated admin token (``admin_token``).  It is its owner's only: 0700, its
files 0600 (the embedded Redis has no password; only its owner may reach it).

redis-py and pydantic are imported inside the functions that use them: the
sub-commands import this module when they register, and ``noisyloop replay``
needs neither.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.server.supervisor import StoreSupervisor
    from app.settings import Settings

ADMIN_TOKEN_FILE = "admin_token"
REDIS_URL_FILE = "redis.url"
REDIS_DIR = "redis"


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
def redis_for(settings: Settings, *, publish_url: bool = False,
              supervisor: StoreSupervisor | None = None) -> Iterator[str]:
    """The Redis URL to use: the configured one, the running embedded one, or a new one.

    A new embedded server is stopped on exit; with ``publish_url`` its URL is
    written to ``data_dir/redis.url`` while it runs; with a ``supervisor`` it is
    restarted whenever it exits meanwhile.
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
            with supervisor.watching(server) if supervisor else contextlib.nullcontext():
                yield server.url
        finally:
            if publish_url:
                url_file.unlink(missing_ok=True)
