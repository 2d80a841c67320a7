"""Decisions out: the decision log is published to a topic, each record once per pass, the
same records as ``GET .../log`` gives, and nothing again once the mark has moved."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson
import pytest
from confluent_kafka import Producer

from app.bench.kafkabroker import LocalBroker
from app.server.kafka.decisions import DecisionPublisher
from app.store import Store
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, post_feedback, predict_all
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import read_topic

EVENTS = 40


@pytest.mark.slow
async def test_decision_log_published_once_as_get_log_gives_it(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        broker: LocalBroker) -> None:
    new_model(client, tenant)
    preds = predict_all(client, tenant, np.random.default_rng(0).normal(size=(EVENTS, 4)))
    r = post_feedback(client, tenant, {"events": [{"event_id": p["event_id"], "click": True}
                                                  for p in preds]})
    assert r.json()["accepted"] == EVENTS
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    logged = [orjson.loads(line) for line in
              client.get("/v1/models/m1/log", headers=tenant).text.splitlines()]
    assert sum(1 for record in logged if record["type"] == "event") == EVENTS

    kafka = kafka_settings(broker)
    topic = f"{kafka.topic}.decisions"
    broker.create_topic(topic)
    settings = kafka.model_copy(update={"decisions_topic": topic})
    store = Store.from_url(redis_url)
    publisher = DecisionPublisher(store, settings)
    loop = asyncio.get_running_loop()
    try:
        with ThreadPoolExecutor(1) as pool:
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            assert await publisher.publish_pass(loop, pool, producer) == len(logged)
            assert await publisher.publish_pass(loop, pool, producer) == 0  # the mark moved
        assert await store.log.published(ModelKeys("acme", "m1")) != "0-0"
    finally:
        await store.close()
    published = read_topic(broker.bootstrap, topic, 1, len(logged))
    records = [orjson.loads(m.value()) for m in published]
    assert [{k: v for k, v in rec.items() if k not in ("tenant_id", "model_id")}
            for rec in records] == logged
    assert {(rec["tenant_id"], rec["model_id"]) for rec in records} == {("acme", "m1")}
    keyed = [m.key() for m in published if orjson.loads(m.value())["type"] == "event"]
    assert keyed == [rec["event_id"].encode() for rec in logged if rec["type"] == "event"]
