"""The Kafka consumer inside the app, against a local broker: every decision's feedback is
applied exactly once, re-sent copies are counted as duplicates, and every bad message is on
the dead-letter topic with its reason."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import pytest

from app.bench.kafkabroker import LocalBroker
from app.main import create_app
from app.server.kafka import kafka_roles
from app.server.kafka.consumer import REASON_HEADER
from app.server.kafka.settings import KafkaSettings
from app.settings import Settings
from app.store.events import new_event_id
from tests.api.conftest import (
    ADMIN_TOKEN,
    TestClient,
    new_model,
    new_tenant,
    predict_all,
    run_trainer,
)
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import produce, read_topic, wait_for

PARTITIONS = 3


def consuming_client(redis_url: str, kafka: KafkaSettings) -> TestClient:
    """The app with its trainer and the Kafka consumer as background roles (as in serve)."""
    app = create_app(Settings(redis_url=redis_url, admin_token=ADMIN_TOKEN),
                     background=[run_trainer, *kafka_roles(kafka)])
    return TestClient(app)


def sample(client: TestClient, name: str, **labels: str) -> float | None:
    """A sample of the app's metrics (None before it exists)."""
    registry = client.app.state.ctx.metrics.registry  # type: ignore[attr-defined]
    value: float | None = registry.get_sample_value(name, labels)
    return value


def counted(client: TestClient, name: str, **labels: str) -> float:
    """A counter of the app's metrics (0 before its first count)."""
    return sample(client, name, **labels) or 0.0


@pytest.fixture
def kafka(broker: LocalBroker) -> KafkaSettings:
    return kafka_settings(broker, PARTITIONS, tenants=("acme",))


@pytest.fixture
def app_client(redis_url: str, kafka: KafkaSettings) -> Iterator[TestClient]:
    with consuming_client(redis_url, kafka) as client:
        yield client


def message(event: dict[str, Any], model: str = "m1", tenant: str = "acme") -> tuple[bytes, bytes]:
    """A feedback message: key the event id, value the event with its tenant and model."""
    return (str(event.get("event_id", "")).encode(),
            orjson.dumps({"tenant_id": tenant, "model_id": model, **event}))


def bad_messages() -> list[tuple[tuple[bytes | None, bytes], str]]:
    """Malformed messages of every kind, each with the reason it must be dead-lettered for."""
    eid = new_event_id()
    kinds: list[tuple[tuple[bytes | None, bytes], str]] = [
        ((None, b"{not json"), "invalid_json"),
        ((None, b"[1, 2]"), "invalid_json"),
        ((None, b"\xff\xfe"), "invalid_json"),
        ((eid.encode(), orjson.dumps({"model_id": "m1", "event_id": eid, "click": True})),
         "invalid_request"),
        (message({"event_id": eid, "click": True}, model="nope"), "unknown_model"),
        (message({"event_id": eid, "click": True}, tenant="globex"), "other_tenant"),
        (message({"event_id": new_event_id(), "click": True}), "unknown_event"),
        (message({"event_id": eid, "click": "yes"}), "invalid_request"),
        (message({"click": True}), "invalid_request"),
        (message({"event_id": eid, "click": True, "extra": 1}), "invalid_request"),
    ]
    return kinds * 4


@pytest.mark.slow
def test_feedback_from_kafka_applied_once_with_copies_and_dead_letters(
        app_client: TestClient, kafka: KafkaSettings, broker: LocalBroker) -> None:
    auth = new_tenant(app_client)
    new_model(app_client, auth)
    rng = np.random.default_rng(0)
    preds = predict_all(app_client, auth, rng.normal(size=(5000, 4)))
    good = [message({"event_id": p["event_id"], "click": bool(rng.random() < 0.5)})
            for p in preds]
    stream: list[tuple[bytes | None, bytes]] = list(good)
    picker = random.Random(1)
    for copy in picker.sample(good, 300):  # each copy somewhere after its original
        stream.insert(picker.randrange(stream.index(copy) + 1, len(stream) + 1), copy)
    bad = bad_messages()
    for msg, _ in bad:
        stream.insert(picker.randrange(len(stream) + 1), msg)
    produce(broker.bootstrap, kafka.topic, stream)

    wait_for(lambda: sum(counted(app_client, "noisyloop_kafka_messages_total", outcome=o)
                         for o in ("accepted", "duplicate", "dead_lettered")) >= len(stream),
             "the consumer to read every message")
    assert counted(app_client, "noisyloop_kafka_messages_total", outcome="accepted") == 5000
    assert counted(app_client, "noisyloop_kafka_messages_total", outcome="duplicate") == 300
    assert counted(app_client, "noisyloop_kafka_messages_total",
                   outcome="dead_lettered") == len(bad)
    assert app_client.post("/v1/models/m1/sync", headers=auth).status_code == 200
    stats = app_client.get("/v1/models/m1", headers=auth).json()["stats"]
    assert stats["feedback_accepted"] == stats["events_applied"] == 5000

    letters = read_topic(broker.bootstrap, kafka.dead_letters, 1, len(bad))
    expected = sorted((value, reason) for (_, value), reason in bad)
    got = []
    for letter in letters:
        doc = orjson.loads(letter.value())
        assert dict(letter.headers() or [])[REASON_HEADER].decode() == doc["reason"]
        assert doc["topic"] == kafka.topic and doc["message"]
        value = doc["value"].encode() if doc["value"] != "fffe" else b"\xff\xfe"
        got.append((value, doc["reason"]))
    assert sorted(got) == expected
    assert counted(app_client, "noisyloop_kafka_dead_letters_total",
                   reason="other_tenant") == 4
    wait_for(lambda: all(sample(app_client, "noisyloop_kafka_consumer_lag",
                                 topic=kafka.topic, partition=str(p)) == 0
                         for p in range(PARTITIONS)), "the lag of every partition to be 0")
