"""Decisions out: the decision log is published to a topic, each record once per pass, the
same records as ``GET .../log`` gives, and nothing again once the mark has moved; a log
stored before publishing began is published only when asked (``decisions_from_start``)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


def _train(client: TestClient, tenant: dict[str, str], seed: int, model: str = "m1") -> None:
    """EVENTS decisions of ``model`` with their feedback, applied."""
    preds = predict_all(client, tenant, np.random.default_rng(seed).normal(size=(EVENTS, 4)),
                        model=model)
    r = post_feedback(client, tenant, {"events": [{"event_id": p["event_id"], "click": True}
                                                  for p in preds]}, model=model)
    assert r.json()["accepted"] == EVENTS
    assert client.post(f"/v1/models/{model}/sync", headers=tenant).status_code == 200


def _log(client: TestClient, tenant: dict[str, str], model: str = "m1") -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in
            client.get(f"/v1/models/{model}/log", headers=tenant).text.splitlines()]


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
    settings = kafka.model_copy(update={"decisions_topic": topic, "decisions_from_start": True})
    store = Store.from_url(redis_url)
    publisher = DecisionPublisher(store, settings)
    loop = asyncio.get_running_loop()
    try:
        with ThreadPoolExecutor(1) as pool:
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            assert await publisher.publish_pass(loop, pool, producer) == len(logged)
            assert await publisher.publish_pass(loop, pool, producer) == 0  # the mark moved
        assert await store.log.published(ModelKeys("acme", "m1")) is not None
    finally:
        await store.close()
    published = read_topic(broker.bootstrap, topic, 1, len(logged))
    records = [orjson.loads(m.value()) for m in published]
    assert [{k: v for k, v in rec.items() if k not in ("tenant_id", "model_id")}
            for rec in records] == logged
    assert {(rec["tenant_id"], rec["model_id"]) for rec in records} == {("acme", "m1")}
    keyed = [m.key() for m in published if orjson.loads(m.value())["type"] == "event"]
    assert keyed == [rec["event_id"].encode() for rec in logged if rec["type"] == "event"]


@pytest.mark.slow
async def test_stored_log_not_published_only_what_is_written_after(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        broker: LocalBroker) -> None:
    """The topic set on a store that already holds a log: nothing of it goes out; the
    decisions written afterwards do, and so does the whole log of a model created after
    publishing began; a restarted publisher goes on from its marks."""
    new_model(client, tenant)
    _train(client, tenant, 0)
    stored = _log(client, tenant)
    assert sum(1 for record in stored if record["type"] == "event") == EVENTS

    kafka = kafka_settings(broker)
    topic = f"{kafka.topic}.decisions"
    broker.create_topic(topic)
    settings = kafka.model_copy(update={"decisions_topic": topic})
    assert not settings.decisions_from_start  # the default
    store = Store.from_url(redis_url)
    loop = asyncio.get_running_loop()
    try:
        with ThreadPoolExecutor(1) as pool:
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            publisher = DecisionPublisher(store, settings)
            assert await publisher.publish_pass(loop, pool, producer) == 0
            _train(client, tenant, 1)
            new_model(client, tenant, model_id="m2")
            _train(client, tenant, 2, model="m2")
            written = _log(client, tenant)[len(stored):]
            later = _log(client, tenant, "m2")
            assert len(written) >= EVENTS and len(later) >= EVENTS
            assert await publisher.publish_pass(loop, pool, producer) == (
                len(written) + len(later))
            restarted = DecisionPublisher(store, settings)
            assert await restarted.publish_pass(loop, pool, producer) == 0
    finally:
        await store.close()
    published = read_topic(broker.bootstrap, topic, 1, len(written) + len(later))
    records = [orjson.loads(m.value()) for m in published]
    by_model = {model: [{k: v for k, v in rec.items() if k not in ("tenant_id", "model_id")}
                        for rec in records if rec["model_id"] == model]
                for model in ("m1", "m2")}
    assert by_model == {"m1": written, "m2": later}


async def test_a_context_stored_sparse_is_published_sparse(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        broker: LocalBroker) -> None:
    """A wide model's one-non-zero contexts go out in the log's sparse form, a few hundred
    bytes a record (dense, 100,000 features took about 400 KB)."""
    new_model(client, tenant, n_features=100_000)
    preds = client.post("/v1/models/m1/predict", headers=tenant, json={"instances": [
        {"indices": [i], "values": [1.0]} for i in range(5)]}).json()["predictions"]
    r = post_feedback(client, tenant, {"events": [{"event_id": p["event_id"], "click": True}
                                                  for p in preds]})
    assert r.json()["accepted"] == 5
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    kafka = kafka_settings(broker)
    topic = f"{kafka.topic}.decisions"
    broker.create_topic(topic)
    settings = kafka.model_copy(update={"decisions_topic": topic, "decisions_from_start": True})
    store = Store.from_url(redis_url)
    try:
        with ThreadPoolExecutor(1) as pool:
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            assert await DecisionPublisher(store, settings).publish_pass(
                asyncio.get_running_loop(), pool, producer) == 5
    finally:
        await store.close()
    published = read_topic(broker.bootstrap, topic, 1, 5)
    assert max(len(m.value()) for m in published) < 1000
    index = {p["event_id"]: i for i, p in enumerate(preds)}
    for message in published:
        record = orjson.loads(message.value())
        assert record["features"] == {"size": 100_000, "indices": [index[record["event_id"]]],
                                      "values": [1.0]}
