"""A batch that meets a store failure is not committed: the consumer seeks back, reads it
again, and once the store answers every message is accepted, none lost.  An unexpected
error restarts the consumer from the last commit: none lost, none applied twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest

from app.api.context import ApiContext
from app.bench.kafkabroker import LocalBroker
from app.metrics import Metrics
from app.server.kafka import consumer
from app.server.kafka.consumer import KafkaFeedbackConsumer
from app.server.kafka.feedback import Verdict
from app.settings import Settings
from app.store import Store
from tests.api.conftest import TestClient, new_model, predict_all
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import WAIT_SECONDS, produce

EVENTS = 50


def click_messages(client: TestClient, tenant: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """A click message for each of ``EVENTS`` decisions of a new model ``m1``."""
    new_model(client, tenant)
    preds = predict_all(client, tenant, np.random.default_rng(0).normal(size=(EVENTS, 4)))
    return [(p["event_id"].encode(), orjson.dumps({"tenant_id": "acme", "model_id": "m1",
                                                   "event_id": p["event_id"], "click": True}))
            for p in preds]


def messages_total(ctx: ApiContext, outcome: str) -> float:
    return ctx.metrics.registry.get_sample_value("noisyloop_kafka_messages_total",
                                                 {"outcome": outcome}) or 0


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (on the event loop) until ``condition()`` holds."""
    for _ in range(int(WAIT_SECONDS / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.mark.slow
async def test_store_failure_rereads_the_batch_and_loses_nothing(
        client: TestClient, tenant: dict[str, str], redis_url: str, broker: LocalBroker,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kafka = kafka_settings(broker, 2)
    produce(broker.bootstrap, kafka.topic, click_messages(client, tenant))
    down = Store.from_url(f"unix://{tmp_path}/no-redis.sock")
    up = Store.from_url(redis_url)
    ctx = ApiContext.open(Settings(redis_url=redis_url), down, Metrics())
    counts = ctx.metrics.registry
    stop = asyncio.Event()
    task = asyncio.create_task(KafkaFeedbackConsumer(ctx, kafka).run(stop))
    try:
        await until(lambda: "not committed" in caplog.text, "a failed batch")
        ctx.store = up  # the store answers again
        await until(lambda: (counts.get_sample_value("noisyloop_kafka_messages_total",
                                                     {"outcome": "accepted"}) or 0) >= EVENTS,
                    "every message to be accepted")
    finally:
        stop.set()
        await task
        await down.close()
        await up.close()
    assert counts.get_sample_value("noisyloop_kafka_messages_total",
                                   {"outcome": "accepted"}) == EVENTS
    assert counts.get_sample_value("noisyloop_kafka_messages_total",
                                   {"outcome": "dead_lettered"}) == 0
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["feedback_accepted"] == stats["events_applied"] == EVENTS


@pytest.mark.slow
async def test_unexpected_error_restarts_the_consumer_without_loss_or_double_apply(
        client: TestClient, tenant: dict[str, str], redis_url: str, broker: LocalBroker,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    kafka = kafka_settings(broker, 2)
    produce(broker.bootstrap, kafka.topic, click_messages(client, tenant))
    accept = consumer.accept_messages
    joined_then_failed: list[int] = []

    async def fail_once(ctx: ApiContext, values: Sequence[bytes | None],
                        tenants: Collection[str] = ()) -> list[Verdict]:
        """Join the messages, then fail once as a defect would (nothing committed)."""
        verdicts = await accept(ctx, values, tenants)
        if not joined_then_failed:
            joined_then_failed.append(len(values))
            raise RuntimeError("an unexpected defect")
        return verdicts

    monkeypatch.setattr(consumer, "accept_messages", fail_once)
    monkeypatch.setattr(consumer, "RESTART_SECONDS", 0.1)
    store = Store.from_url(redis_url)
    ctx = ApiContext.open(Settings(redis_url=redis_url), store, Metrics())
    stop = asyncio.Event()
    task = asyncio.create_task(KafkaFeedbackConsumer(ctx, kafka).run(stop))
    try:
        await until(lambda: messages_total(ctx, "accepted") + messages_total(ctx, "duplicate")
                    >= EVENTS, "every message to be read after the restart")
    finally:
        stop.set()
        await task
        await store.close()
    assert "an unexpected defect" in caplog.text
    assert ctx.metrics.registry.get_sample_value(
        "noisyloop_kafka_consumer_restarts_total") == 1
    # the failed call's events were joined before the error: read again, they are duplicates
    assert messages_total(ctx, "duplicate") >= joined_then_failed[0] > 0
    assert messages_total(ctx, "accepted") + messages_total(ctx, "duplicate") == EVENTS
    assert messages_total(ctx, "dead_lettered") == 0
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["feedback_accepted"] == stats["events_applied"] == EVENTS
