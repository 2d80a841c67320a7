"""A batch that meets a store failure is not committed: the consumer seeks back, reads it
again, and once the store answers every message is accepted, none lost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest

from app.api.context import ApiContext
from app.bench.kafkabroker import LocalBroker
from app.metrics import Metrics
from app.server.kafka.consumer import KafkaFeedbackConsumer
from app.settings import Settings
from app.store import Store
from tests.api.conftest import TestClient, new_model, predict_all
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import WAIT_SECONDS, produce

EVENTS = 50


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
    new_model(client, tenant)
    preds = predict_all(client, tenant, np.random.default_rng(0).normal(size=(EVENTS, 4)))
    kafka = kafka_settings(broker, 2)
    produce(broker.bootstrap, kafka.topic, [
        (p["event_id"].encode(), orjson.dumps({"tenant_id": "acme", "model_id": "m1",
                                               "event_id": p["event_id"], "click": True}))
        for p in preds])
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
