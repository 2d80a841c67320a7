"""``noisyloop api``: the API alone (one or several processes) against an external Redis."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from app.commands.arguments import add_service_arguments
from app.commands.worker import checked_settings

if TYPE_CHECKING:
    from fastapi import FastAPI


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("api", help="run the API alone against an external Redis")
    add_service_arguments(parser, embedded=False)
    parser.add_argument("--workers", type=int, default=1,
                        help="API processes, each accepting on its own socket "
                             "(SO_REUSEPORT on Linux)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve the API (uvicorn as :func:`~app.server.options.uvicorn_options` sets it up);
    ``--workers N`` runs N processes, each accepting on its own socket
    (:mod:`app.server.reuseport`)."""
    import uvicorn

    from app.logs import configure_logging
    from app.main import create_app
    from app.server import reuseport
    from app.server.options import uvicorn_options

    settings = checked_settings(args, "api")
    if settings is None:
        return 2
    configure_logging(settings.log_level, settings.log_json)
    if settings.redis_url is None:
        raise SystemExit("noisyloop api needs --redis-url or REDIS_URL "
                         "(use `noisyloop serve` for the embedded Redis)")
    options = uvicorn_options(settings)
    if args.workers > 1:
        # each worker process builds its app from the environment
        os.environ["NOISYLOOP_REDIS_URL"] = settings.redis_url
        return reuseport.serve("app.commands.api:worker_app", args.workers, settings.host,
                               settings.port, **options)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, **options)
    return 0


def worker_app() -> FastAPI:
    """The app of one worker process of ``--workers N``: settings from the environment."""
    from app.logs import configure_logging
    from app.main import create_app
    from app.settings import Settings

    settings = Settings()
    configure_logging(settings.log_level, settings.log_json)
    return create_app(settings)
