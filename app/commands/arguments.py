"""The flags the service commands share, and the settings they give.

pydantic and the settings are imported inside :func:`settings_from_args`:
every sub-command's ``register`` imports this module, and ``noisyloop
replay`` needs neither.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.settings import Settings


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
