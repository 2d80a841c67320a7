"""The Kafka consumer's settings: parsed from the environment, unsafe ones refused at start,
each documented; a message's routing fields checked before anything is read from Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.server.kafka import kafka_roles
from app.server.kafka.feedback import Verdict, parse_message
from app.server.kafka.settings import ENV_PREFIX, KafkaSettings

ROOT = Path(__file__).resolve().parents[3]


def test_settings_read_tenants_and_default_dead_letter_topic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOISYLOOP_KAFKA_BOOTSTRAP", "k1:9092,k2:9092")
    monkeypatch.setenv("NOISYLOOP_KAFKA_TENANTS", " acme, globex ,,acme")
    monkeypatch.setenv("NOISYLOOP_KAFKA_CONFIG", '{"security.protocol": "SASL_SSL"}')
    settings = KafkaSettings()
    assert settings.tenants == ("acme", "globex")
    assert settings.dead_letters == "noisyloop.feedback.dead"
    assert settings.config == {"security.protocol": "SASL_SSL"}
    assert KafkaSettings(topic="t", dead_letter_topic="bad").dead_letters == "bad"


def test_settings_refuse_the_properties_noisyloop_sets() -> None:
    with pytest.raises(ValidationError, match=r"enable\.auto\.commit"):
        KafkaSettings(config={"enable.auto.commit": True})
    with pytest.raises(ValidationError, match=r"group\.id"):
        KafkaSettings(consumer_config={"group.id": "x"})


def test_consumer_properties_go_to_the_consumer_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer property given to a producer makes librdkafka warn (CONFWARN) at start:
    the shared config reaches every client, the consumer's and the producers' their own."""
    monkeypatch.setenv("NOISYLOOP_KAFKA_BOOTSTRAP", "k:9092")
    monkeypatch.setenv("NOISYLOOP_KAFKA_CONFIG", '{"security.protocol": "SASL_SSL"}')
    monkeypatch.setenv("NOISYLOOP_KAFKA_CONSUMER_CONFIG", '{"fetch.wait.max.ms": 20}')
    monkeypatch.setenv("NOISYLOOP_KAFKA_PRODUCER_CONFIG", '{"linger.ms": 50}')
    settings = KafkaSettings()
    assert settings.properties("consumer") == {
        "bootstrap.servers": "k:9092", "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000, "security.protocol": "SASL_SSL",
        "fetch.wait.max.ms": 20}
    assert settings.properties("producer") == {
        "bootstrap.servers": "k:9092", "security.protocol": "SASL_SSL", "linger.ms": 50}


def test_no_consumer_without_bootstrap() -> None:
    assert kafka_roles(KafkaSettings(bootstrap=None)) == []
    assert len(kafka_roles(KafkaSettings(bootstrap="k:9092"))) == 1
    assert len(kafka_roles(KafkaSettings(bootstrap="k:9092", decisions_topic="d"))) == 2


def test_every_setting_is_documented() -> None:
    page = (ROOT / "docs" / "production.md").read_text()
    missing = [name for name in KafkaSettings.model_fields
               if f"| `{ENV_PREFIX}{name.upper()}` |" not in page]
    assert not missing


@pytest.mark.parametrize(("value", "reason", "field"), [
    (b"", "invalid_json", None),
    (b'"click"', "invalid_json", None),
    (b'{"model_id": "m1", "event_id": "e"}', "invalid_request", "tenant_id"),
    (b'{"tenant_id": "acme", "model_id": 3}', "invalid_request", "model_id"),
    (b'{"tenant_id": "globex", "model_id": "m1"}', "other_tenant", "tenant_id"),
])
def test_parse_message_refuses_with_the_reason(value: bytes, reason: str,
                                               field: str | None) -> None:
    verdict = parse_message(value, ("acme",))
    assert isinstance(verdict, Verdict)
    assert (verdict.outcome, verdict.reason, verdict.field) == ("dead_lettered", reason, field)


def test_parse_message_gives_the_event_without_its_routing_fields() -> None:
    value = b'{"tenant_id": "acme", "model_id": "m1", "event_id": "e", "click": true}'
    assert parse_message(value, ()) == (("acme", "m1"), {"event_id": "e", "click": True})


@pytest.mark.slow
def test_worker_with_refused_kafka_settings_exits_2_naming_the_variable() -> None:
    env = {**os.environ, "NOISYLOOP_KAFKA_BOOTSTRAP": "127.0.0.1:1",
           "NOISYLOOP_KAFKA_CONFIG": '{"group.id": "x"}'}
    done = subprocess.run([sys.executable, "-m", "app.cli", "worker"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "NOISYLOOP_KAFKA_CONFIG" in done.stderr and "group.id" in done.stderr
