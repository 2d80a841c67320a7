"""``noisyloop worker``: the background roles as their own process, against an external Redis.

    noisyloop worker [--roles trainer,jobs,sweeper] [--metrics-port 9100] [--check]

Exports its Prometheus metrics on ``--metrics-port`` (to a caller with the
metrics token, ``NOISYLOOP_METRICS_TOKEN``, or the admin token as ``Authorization:
Bearer``), refreshes a heartbeat
key, and on SIGTERM/SIGINT finishes (or abandons, without losing) the batch
at hand and gives its leases back.  ``--check`` exits 0 when the heartbeat
of this worker id (default: the host name) is fresh, 1 otherwise: the
liveness probe of the container.

With ``NOISYLOOP_KAFKA_BOOTSTRAP`` set it also consumes feedback from Kafka
(:mod:`app.server.kafka`, configured by ``NOISYLOOP_KAFKA_*``).

Every other flag is a field of the settings' worker section,
:class:`app.worker_settings.WorkerSettings` (``--batch-size`` sets
``batch_size``): a flag given overrides the environment
(``NOISYLOOP_WORKER_BATCH_SIZE``), which overrides the default.
The flags are added when this sub-command is used (pydantic is not imported
for the others).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

from app.commands.arguments import add_service_arguments, settings_from_args
from app.commands.deferred import add_later
from app.server.datadir import redis_for

if TYPE_CHECKING:
    from pydantic import ValidationError

    from app.server.kafka.settings import KafkaSettings
    from app.settings import Settings
    from app.worker_settings import WorkerSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "worker", help="run background roles (trainer, jobs, sweeper) against a Redis",
        description="Run the background roles as one process.  Each flag below overrides its "
                    "environment variable, which overrides the default.")
    add_service_arguments(parser, http=False)
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on this port")
    parser.add_argument("--check", action="store_true",
                        help="exit 0 if this worker's heartbeat is fresh, else 1 (probes)")
    add_later(parser, add_settings_flags)
    parser.set_defaults(handler=run)


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per :class:`~app.worker_settings.WorkerSettings` field; absent flags stay unset."""
    from app.worker_settings import WorkerSettings

    for name, field in WorkerSettings.model_fields.items():
        env = WorkerSettings.env_var(name)
        if field.default_factory is not None:
            shown = f"env {env}"
        elif isinstance(field.default, tuple):
            shown = f"default {','.join(field.default)}; env {env}"
        else:
            shown = f"default {field.default}; env {env}"
        kwargs: dict[str, Any] = {"help": f"{(field.description or '').rstrip('.')} ({shown})",
                                  "default": argparse.SUPPRESS}
        if field.annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif field.annotation in (int, float):
            kwargs["type"] = field.annotation
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, dest=name, **kwargs)


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    """The worker's settings: the environment, overridden by the flags given."""
    return settings_from_args(args).worker


def checked_settings(args: argparse.Namespace, command: str) -> Settings | None:
    """The settings of ``args`` (:func:`~app.commands.arguments.settings_from_args`); None,
    having said why on stderr, when they are refused."""
    from pydantic import ValidationError

    try:
        return settings_from_args(args)
    except ValidationError as exc:
        sys.stderr.write(f"noisyloop {command}: {invalid_settings(exc)}\n")
        return None


def run(args: argparse.Namespace) -> int:
    from app.logs import configure_logging

    settings = checked_settings(args, "worker")
    if settings is None:
        return 2
    worker = settings.worker
    kafka = kafka_settings("worker")
    if kafka is None:
        return 2
    configure_logging(settings.log_level, settings.log_json)
    with redis_for(settings) as url:
        if args.check:
            return asyncio.run(_check(url, worker.worker_id))
        return asyncio.run(_serve(url, worker, args.metrics_port,
                                  settings.model_copy(update={"redis_url": url}), kafka))


def invalid_settings(exc: ValidationError) -> str:
    """The refused settings of ``exc``: each field (its position in a list), reason, value,
    and where to set it; a ``NOISYLOOP_WORKER_*`` variable that is no setting is named, with
    the closest one."""
    from app.learners.registry import did_you_mean
    from app.worker_settings import ENV_PREFIX, WorkerSettings

    out = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        if loc[0] != "worker" or len(loc) == 1:  # the API's part
            out.append(f"{'.'.join(loc)}: {err['msg']} (got {err['input']!r}; "
                       f"NOISYLOOP_{loc[0].upper()})")
            continue
        key, *within = loc[1:]
        name = WorkerSettings.field_named(key)
        if name in WorkerSettings.model_fields:
            where = f"--{name.replace('_', '-')} or {WorkerSettings.env_var(name)}"
        else:
            known = [WorkerSettings.env_var(field) for field in WorkerSettings.model_fields]
            where = (f"{ENV_PREFIX}{key.upper()} is no setting"
                     f"{did_you_mean(ENV_PREFIX + key.upper(), known)}")
        out.append(f"{'.'.join([name, *within])}: {err['msg']} "
                   f"(got {err['input']!r}; {where})")
    return "; ".join(out)


def kafka_settings(command: str) -> KafkaSettings | None:
    """The Kafka consumer's settings (``NOISYLOOP_KAFKA_*``); None, having said why on
    stderr, when they are refused."""
    from pydantic import ValidationError

    from app.server.kafka.settings import KafkaSettings, invalid_kafka_settings

    try:
        return KafkaSettings()
    except ValidationError as exc:
        sys.stderr.write(f"noisyloop {command}: {invalid_kafka_settings(exc)}\n")
        return None


async def _check(url: str, worker_id: str) -> int:
    from redis import RedisError

    from app.store import Store
    from app.store.leases import HeartbeatStore

    store = Store.from_url(url)
    try:
        info = await HeartbeatStore(store.redis).info(worker_id)
    except (RedisError, OSError):  # unreachable store: not healthy
        return 1
    finally:
        await store.close()
    return 0 if info is not None else 1


async def _serve(url: str, settings: WorkerSettings, metrics_port: int | None,
                 app_settings: Settings, kafka: KafkaSettings) -> int:
    from app.metrics import Metrics
    from app.server.kafka import kafka_roles
    from app.store import Store
    from workers.worker import Worker

    store = Store.from_url(url)
    metrics = Metrics()
    worker = Worker(store, settings, metrics=metrics, metrics_port=metrics_port,
                    metrics_tokens=app_settings.metrics_tokens())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    roles = [worker.run]
    consumers = kafka_roles(kafka)
    if consumers:  # the Kafka consumer takes feedback through the API's feedback path
        from app.api.context import ApiContext

        ctx = ApiContext.open(app_settings, store, metrics)
        roles += [partial(role, ctx) for role in consumers]
    try:
        await asyncio.gather(*(role(stop) for role in roles))
    finally:
        await store.close()
    return 0
