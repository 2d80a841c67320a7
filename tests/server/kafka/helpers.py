"""Producing to and reading from the test broker; waiting for a consumer's counts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, Message, Producer, TopicPartition

#: Longest wait for the consumer to get through a test's messages.
WAIT_SECONDS = 120.0


def produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]]) -> None:
    """Write ``(key, value)`` messages to ``topic`` in order, and wait until they are in."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value in messages:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(30) == 0


def read_topic(bootstrap: str, topic: str, partitions: int, count: int) -> list[Message]:
    """The first ``count`` messages of ``topic`` (all its partitions, no consumer group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[Message] = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while len(found) < count and time.monotonic() < deadline:
            found += [m for m in consumer.consume(count - len(found), 0.5) if m.error() is None]
    finally:
        consumer.close()
    return found


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (AssertionError naming ``what`` after the wait)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)
