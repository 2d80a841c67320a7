"""``noisyloop serve`` with ``NOISYLOOP_KAFKA_BOOTSTRAP`` set runs the Kafka consumer (and,
with a decisions topic, the decision publisher), no client warning of a property meant for
another (librdkafka's ``CONFWARN``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from app.bench.kafkabroker import LocalBroker
from app.store.embedded import free_port
from tests.commands.test_serve import _wait_ready
from tests.server.kafka.conftest import kafka_settings
from tests.server.kafka.helpers import produce, wait_for

ADMIN_TOKEN = "serve-kafka-admin-token-0123456789"


@pytest.mark.slow
def test_serve_consumes_feedback_from_kafka(tmp_path: Path, broker: LocalBroker) -> None:
    kafka = kafka_settings(broker)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "NOISYLOOP_LOG_LEVEL": "WARNING", "NOISYLOOP_ADMIN_TOKEN": ADMIN_TOKEN,
           "NOISYLOOP_KAFKA_BOOTSTRAP": broker.bootstrap, "NOISYLOOP_KAFKA_TOPIC": kafka.topic,
           "NOISYLOOP_KAFKA_CONSUMER_CONFIG": orjson.dumps(kafka.consumer_config).decode(),
           "NOISYLOOP_KAFKA_DECISIONS_TOPIC": f"{kafka.topic}.decisions"}
    broker.create_topic(f"{kafka.topic}.decisions")
    for name in ("REDIS_URL", "NOISYLOOP_REDIS_URL"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--data-dir", str(tmp_path / "data")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(base, proc)
        key = httpx.post(f"{base}/v1/admin/tenants", json={"tenant_id": "acme"},
                         headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        assert httpx.post(f"{base}/v1/models", headers=auth, json={
            "model_id": "m1", "task": "label", "algorithm": "rcnbf", "n_features": 3,
            "n_classes": 3}).status_code == 201
        preds = httpx.post(f"{base}/v1/models/m1/predict", headers=auth,
                           json={"instances": [[1, 0, 0], [0, 1, 0]]}).json()["predictions"]
        produce(broker.bootstrap, kafka.topic, [
            (p["event_id"].encode(), orjson.dumps({"tenant_id": "acme", "model_id": "m1",
                                                   "event_id": p["event_id"], "click": True}))
            for p in preds])

        def accepted() -> int:
            stats = httpx.get(f"{base}/v1/models/m1", headers=auth).json()["stats"]
            return int(stats["feedback_accepted"])

        wait_for(lambda: accepted() == 2, "serve to accept the feedback from Kafka")
        # counted once the batch's commit was sent, a moment after the join
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}  # the metrics need a credential
        wait_for(lambda: 'noisyloop_kafka_messages_total{outcome="accepted"} 2.0'
                 in httpx.get(f"{base}/metrics", headers=admin).text,
                 "the accepted messages to be counted")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "CONFWARN" not in err, err
