"""``noisyloop serve``: the API and every background role in one process.

With no Redis URL it starts an embedded redis-server (AOF under
``--data-dir``); on first start without an admin token it generates one,
stores it in the data directory and prints it with a curl example.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
from typing import TYPE_CHECKING

from app.commands.arguments import add_service_arguments
from app.commands.worker import checked_settings, kafka_settings
from app.server.datadir import redis_for, with_admin_token

if TYPE_CHECKING:
    from app.settings import Settings
    from app.worker_settings import WorkerSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("serve", help="run the API and all workers in one process "
                                                 "(embedded Redis unless a URL is given)")
    add_service_arguments(parser)
    parser.set_defaults(handler=run)


def first_start_banner(token: str, host: str, port: int) -> str:
    """What a new user sees once: the admin token and a curl that creates a tenant."""
    base = f"http://{host}:{port}"
    return (
        "\nnoisyloop: generated an admin token (stored in the data directory, shown once):\n\n"
        f"    {token}\n\n"
        "Create a tenant and get its API key:\n\n"
        f"    curl -s -X POST {base}/v1/admin/tenants \\\n"
        f"      -H 'Authorization: Bearer {token}' \\\n"
        "      -H 'Content-Type: application/json' \\\n"
        "      -d '{\"tenant_id\": \"acme\"}'\n"
    )


def serve_worker_settings(settings: Settings) -> WorkerSettings:
    """The in-process worker's settings: the worker section of ``settings``, as for
    ``noisyloop worker``, with the id ``serve-<host name>`` unless ``NOISYLOOP_WORKER_ID``
    sets one (so that a ``noisyloop worker`` on the same host keeps its own)."""
    from app.worker_settings import WorkerSettings

    worker = settings.worker
    if "worker_id" in worker.model_fields_set:
        return worker
    return WorkerSettings.model_validate(
        {**worker.model_dump(), "worker_id": f"serve-{socket.gethostname()}"})


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from app.api.context import ApiContext
    from app.logs import configure_logging
    from app.main import create_app
    from app.metrics import Metrics
    from app.server.kafka import kafka_roles
    from app.server.options import uvicorn_options
    from app.server.supervisor import StoreSupervisor
    from workers.worker import Worker

    checked = checked_settings(args, "serve")
    if checked is None:
        return 2
    configure_logging(checked.log_level, checked.log_json)
    settings, new_token = with_admin_token(checked)
    worker_settings = serve_worker_settings(settings)
    kafka = kafka_settings("serve")
    if kafka is None:
        return 2

    async def workers(ctx: ApiContext, stop: asyncio.Event) -> None:
        await Worker(ctx.store, worker_settings, metrics=ctx.metrics).run(stop)

    metrics = Metrics()
    supervisor = StoreSupervisor(metrics)
    with redis_for(settings, publish_url=True, supervisor=supervisor) as url:
        settings = settings.model_copy(update={"redis_url": url})
        if new_token is not None:
            print(first_start_banner(new_token, settings.host, settings.port), flush=True)
        app = create_app(settings, background=[workers, *kafka_roles(kafka)], metrics=metrics,
                         health=supervisor.health)
        # uvicorn re-raises SIGTERM after its graceful shutdown; a no-op handler lets us
        # return normally, so the embedded Redis is stopped (with its AOF flushed)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        uvicorn.run(app, host=settings.host, port=settings.port, **uvicorn_options(settings))
    return 0
