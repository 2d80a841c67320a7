"""``noisyloop worker``: the background roles as their own process, against an external Redis.

    noisyloop worker [--roles trainer,nrest,sweeper,uma] [--metrics-port 9100] [--check]

Exports its Prometheus metrics on ``--metrics-port``, refreshes a heartbeat
key, and on SIGTERM/SIGINT finishes (or abandons, without losing) the batch
at hand and gives its leases back.  ``--check`` exits 0 when the heartbeat
of this worker id (default: the host name) is fresh, 1 otherwise: the
liveness probe of the container.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from app.commands.runtime import add_service_arguments, redis_for, settings_from_args

#: The :class:`workers.worker.Worker` options with a flag each: (default, what it sets).
WORKER_OPTIONS: dict[str, tuple[float | int, str]] = {
    "lease_ttl": (10.0, ("seconds a trainer lease lives without renewal (a dead worker's models "
                         "are taken over after this)")),
    "heartbeat_ttl": (15.0, ("seconds this worker's heartbeat lives without refresh (what --check "
                             "reads)")),
    "poll_interval": (0.5, "seconds the NREst and sweeper roles sleep when idle"),
    "max_deliveries": (10, ("deliveries after which an event never applied goes to the dead "
                            "letters")),
    "nrest_interval": (600.0, ("seconds after which NREst re-estimates a model's noise rates if "
                               "it has new samples (besides every n_s new samples)")),
    "nrest_buffer": (5000, "NREst samples kept per model whose parameters set no n_s"),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "worker", help="run background roles (trainer, NREst, sweeper) against a Redis",
        description="Run the background roles as one process.  'uma' is accepted as a role "
                    "and means 'trainer': the trainer trains every model, the in-order "
                    "learners (regression, noisy_label/UMA, noisy_input) included.")
    add_service_arguments(parser, http=False)
    parser.add_argument("--roles", default="trainer,nrest,sweeper",
                        help="comma-separated roles (default trainer,nrest,sweeper)")
    parser.add_argument("--worker-id", help="heartbeat and consumer name (default: host name)")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus metrics on this port")
    parser.add_argument("--check", action="store_true",
                        help="exit 0 if this worker's heartbeat is fresh, else 1 (probes)")
    parser.add_argument("--batch-size", type=int, help="stream entries per update, doubled "
                        "after a full read up to 8x (default: settings, 1000)")
    parser.add_argument("--flush-interval", type=float,
                        help="trainer idle sleep in seconds (default: settings, 0.05)")
    for name, (default, meaning) in WORKER_OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(default), default=default,
                            help=f"{meaning} (default {default})")
    parser.add_argument("--nrest-threads", action="store_true",
                        help="fit NREst in a thread instead of a child process")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from app.logs import configure_logging

    settings = settings_from_args(args)
    configure_logging(settings.log_level, settings.log_json)
    with redis_for(settings) as url:
        if args.check:
            return asyncio.run(_check(url, args.worker_id))
        return asyncio.run(_serve(url, args, settings.trainer_batch_size,
                                  settings.trainer_interval_seconds))


async def _check(url: str, worker_id: str | None) -> int:
    from redis import RedisError

    from app.store import Store
    from app.store.leases import HeartbeatStore
    from workers.worker import default_worker_id

    store = Store.from_url(url)
    try:
        info = await HeartbeatStore(store.redis).info(worker_id or default_worker_id())
    except (RedisError, OSError):  # unreachable store: not healthy
        return 1
    finally:
        await store.close()
    return 0 if info is not None else 1


async def _serve(url: str, args: argparse.Namespace, batch_size: int, interval: float) -> int:
    from app.store import Store
    from workers.worker import Worker

    store = Store.from_url(url)
    worker = Worker(
        store, roles=args.roles.split(","), worker_id=args.worker_id,
        batch_size=args.batch_size or batch_size, flush_interval=args.flush_interval or interval,
        metrics_port=args.metrics_port, nrest_processes=not args.nrest_threads,
        **{name: getattr(args, name) for name in WORKER_OPTIONS})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await worker.run(stop)
    finally:
        await store.close()
    return 0
