"""A consumer process SIGKILLed every few seconds while feedback flows: nothing is lost, nothing
is applied twice, and the model ends with the weights of the same events posted over HTTP.

Order matters to a learner (the trainer applies a model's events in the order they were
accepted), so the topic has one partition: the consumer accepts the events in the order they
were produced whatever the kills (a re-read event is refused as a duplicate, in place), and
the reference model gets the same events over HTTP in that order.  Both models are made
alike (same config and seed) and decide on the same inputs before any feedback, so their
decisions and logged contexts are the same.
"""

from __future__ import annotations

import base64
import io
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import redis

from app.bench.kafkabroker import LocalBroker
from app.server.kafka.settings import KafkaSettings
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, post_feedback, predict_all
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import produce, wait_for

EVENTS = 3000
#: Messages produced at a time, the pause between two, and the most produced but not yet
#: accepted (so that feedback still flows at the last kill whatever the start-up times).
CHUNK, PAUSE_SECONDS, AHEAD = 40, 0.2, 400
#: Fewest kills while the feedback flows.
KILLS = 4


def start_consumer(redis_url: str, kafka: KafkaSettings, log: Path) -> subprocess.Popen[bytes]:
    """``noisyloop worker`` running the Kafka consumer (and a sweeper, which has nothing to do
    here: every decision waits a day for its feedback), its log appended to ``log``."""
    env = {**os.environ, "NOISYLOOP_REDIS_URL": redis_url, "NOISYLOOP_LOG_LEVEL": "WARNING",
           "NOISYLOOP_WORKER_ID": "kafka-kill", "NOISYLOOP_KAFKA_BOOTSTRAP": kafka.bootstrap or "",
           "NOISYLOOP_KAFKA_TOPIC": kafka.topic, "NOISYLOOP_KAFKA_GROUP": kafka.group,
           "NOISYLOOP_KAFKA_POLL_SECONDS": "0.1",
           "NOISYLOOP_KAFKA_CONSUMER_CONFIG": orjson.dumps(kafka.consumer_config).decode()}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "app.cli", "worker", "--roles",
                                 "sweeper"], env=env, stdout=subprocess.DEVNULL, stderr=out)


def accepted(redis_url: str, model: str) -> int:
    """The feedback accepted by ``model`` of tenant acme so far (read from any thread)."""
    with redis.Redis.from_url(redis_url) as r:
        return int(r.hget(ModelKeys("acme", model).stats, "feedback_accepted") or 0)


def weights(client: TestClient, auth: dict[str, str], model: str) -> dict[str, np.ndarray]:
    state = client.get(f"/v1/models/{model}/snapshot", headers=auth).json()["state"]
    return {name: np.load(io.BytesIO(base64.b64decode(a["data_b64"])))
            for name, a in state.items()}


@pytest.mark.slow
def test_consumer_sigkilled_repeatedly_gives_the_weights_of_http(
        client: TestClient, tenant: dict[str, str], redis_url: str, broker: LocalBroker,
        tmp_path: Path) -> None:
    kafka = kafka_settings(broker, 1)
    for model in ("kafka", "http"):
        new_model(client, tenant, model_id=model)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(EVENTS, 4))
    decided = {m: predict_all(client, tenant, X, model=m) for m in ("kafka", "http")}
    assert [p["label"] for p in decided["kafka"]] == [p["label"] for p in decided["http"]]
    truth = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0).astype(int)
    clicks = [bool(p["label"] == t) for p, t in zip(decided["kafka"], truth, strict=True)]

    def events(model: str) -> list[dict[str, Any]]:
        return [{"event_id": p["event_id"], "click": c}
                for p, c in zip(decided[model], clicks, strict=True)]

    messages = [(e["event_id"].encode(), orjson.dumps({"tenant_id": "acme", "model_id": "kafka",
                                                       **e})) for e in events("kafka")]
    def flow() -> None:
        for i in range(0, EVENTS, CHUNK):
            wait_for(lambda i=i: i - accepted(redis_url, "kafka") < AHEAD,
                     "the consumer")
            produce(broker.bootstrap, kafka.topic, messages[i:i + CHUNK])
            threading.Event().wait(PAUSE_SECONDS)

    flowing = threading.Thread(target=flow)
    flowing.start()
    picker, kills = random.Random(3), 0
    proc = start_consumer(redis_url, kafka, tmp_path / "consumer.log")
    try:
        while kills < KILLS:
            before = accepted(redis_url, "kafka")
            wait_for(lambda n=before: accepted(redis_url, "kafka") > n,
                     "the restarted consumer to accept feedback")
            threading.Event().wait(picker.uniform(0.2, 1.5))
            assert flowing.is_alive(), "the feedback stopped flowing before the kill"
            proc.kill()
            proc.wait()
            kills += 1
            proc = start_consumer(redis_url, kafka, tmp_path / "consumer.log")
        wait_for(lambda: accepted(redis_url, "kafka") == EVENTS,
                 "every event to be accepted")
    finally:
        flowing.join()
        proc.kill()
        proc.wait()
    assert kills >= KILLS

    for i in range(0, EVENTS, 1000):
        r = post_feedback(client, tenant, {"events": events("http")[i:i + 1000]}, model="http")
        assert r.json()["accepted"] == len(events("http")[i:i + 1000]), r.text
    for model in ("kafka", "http"):
        assert client.post(f"/v1/models/{model}/sync", headers=tenant).status_code == 200
        stats = client.get(f"/v1/models/{model}", headers=tenant).json()["stats"]
        assert stats["feedback_accepted"] == stats["events_applied"] == EVENTS
    got, want = weights(client, tenant, "kafka"), weights(client, tenant, "http")
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, err_msg=name)
