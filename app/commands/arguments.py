"""The flags the service commands share, and the settings they give; the flags and error
messages of the commands that call a service as its client.

pydantic and the settings are imported inside :func:`settings_from_args`:
every sub-command's ``register`` imports this module, and ``noisyloop
replay`` needs neither.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noisyloop_client import NoisyloopError

    from app.settings import Settings


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--key`` of the commands that call a running service as its client."""
    parser.add_argument("--url", default=os.environ.get("NOISYLOOP_URL", "http://127.0.0.1:8000"),
                        help="the service's base URL (default: NOISYLOOP_URL, else "
                             "http://127.0.0.1:8000)")
    parser.add_argument("--key", default=os.environ.get("NOISYLOOP_API_KEY"),
                        help="API key of the model's tenant (default: NOISYLOOP_API_KEY)")


def error_message(exc: NoisyloopError, url: str) -> str:
    """What to print of the service's refusal, or why it could not be reached."""
    from noisyloop_client import ConnectionFailed

    if isinstance(exc, ConnectionFailed):
        return f"{url}: {exc.message}"
    return f"HTTP {exc.status}: {exc.message} ({exc.code}, field {exc.field})"


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
    """Settings from the environment, overridden by the given flags (``noisyloop worker``'s
    set fields of the worker section)."""
    from app.settings import Settings
    from app.worker_settings import WorkerSettings

    overrides: dict[str, Any] = {}
    for name in ("host", "port", "data_dir", "redis_url"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    worker = {name: getattr(args, name) for name in WorkerSettings.model_fields
              if hasattr(args, name)}
    if worker:
        overrides["worker"] = worker
    return Settings(**overrides)
