"""The Kafka feedback consumer's configuration (environment prefix ``NOISYLOOP_KAFKA_``).

The consumer runs only where ``NOISYLOOP_KAFKA_BOOTSTRAP`` is set.  Client
properties are JSON objects of librdkafka properties, given as they are:
``NOISYLOOP_KAFKA_CONFIG`` to every client (the consumer, the dead-letter
producer, the decisions producer): security (SASL, TLS), e.g.
``{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
"sasl.username": "noisyloop", "sasl.password": "..."}``;
``NOISYLOOP_KAFKA_CONSUMER_CONFIG`` to the consumer only (``fetch.wait.max.ms``,
``session.timeout.ms``: a producer given those warns, ``CONFWARN``, and ignores them);
``NOISYLOOP_KAFKA_PRODUCER_CONFIG`` to the producers only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.settings import MAX_BATCH

ENV_PREFIX = "NOISYLOOP_KAFKA_"

#: Client properties noisyloop sets itself: exactly-once effect needs manual commits.
OWN_PROPERTIES = ("bootstrap.servers", "group.id", "enable.auto.commit",
                  "enable.auto.offset.store")
#: The consumer's group-session properties unless the settings give others: a session of
#: 6 s (the least a Kafka broker accepts by default, ``group.min.session.timeout.ms``)
#: instead of librdkafka's 45 s, so a crashed consumer's partitions are taken over sooner,
#: and a broker that waits out part of a session before the first assignment (Tansu: half
#: of it) hands partitions out in about 3 s instead of 23 s
#: (``bench/results/kafka-join.json``).
CONSUMER_DEFAULTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}


class KafkaSettings(BaseSettings):
    """Where to read feedback from, where bad messages go, and which tenants are served."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore",
                                      populate_by_name=True, frozen=True)

    bootstrap: str | None = Field(
        default=None, description="Kafka bootstrap servers (host:port[,host:port...]); unset: "
                                  "no Kafka consumer runs.")
    topic: str = Field(default="noisyloop.feedback", min_length=1,
                       description="Topic of the feedback events (one JSON event a message).")
    dead_letter_topic: str | None = Field(
        default=None, description="Topic of the messages that cannot be applied, with the "
                                  "reason (default: <topic>.dead).")
    group: str = Field(default="noisyloop", min_length=1, description="Consumer group id.")
    decisions_topic: str | None = Field(
        default=None, description="Topic the decision log is published to as it is written "
                                  "(one JSON record a message, as GET .../log gives them); "
                                  "unset: not published.")
    decisions_from_start: bool = Field(
        default=False, description="Publish the whole stored log of a model never published "
                                   "before; false: only what is written after publishing "
                                   "began.")
    tenants: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Tenants this consumer serves, comma-separated (empty: all); "
                                "a message of another tenant is dead-lettered.")
    config: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="librdkafka properties of every client (consumer "
                                          "and producers) as a JSON object "
                                          "(security.protocol, sasl.*, ssl.*, ...).")
    consumer_config: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="librdkafka properties of the feedback consumer "
                                          "only (fetch.wait.max.ms, session.timeout.ms, "
                                          "...), over config's.")
    producer_config: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="librdkafka properties of the producers only (dead "
                                          "letters, decisions), over config's.")
    batch_size: int = Field(default=4 * MAX_BATCH, ge=1, le=100_000,
                            description="Most messages read and accepted as one batch (one Lua "
                                        "call per model and partition of up to 1,000 events) "
                                        "before the commit.")
    poll_seconds: float = Field(default=0.5, gt=0, le=60,
                                description="Longest wait for a message before checking for a "
                                            "stop.")
    stats_seconds: float = Field(default=5.0, gt=0, le=3600,
                                 description="Seconds between two updates of the lag metric.")

    @field_validator("tenants", mode="before")
    @classmethod
    def _tenant_list(cls, value: Any) -> Any:
        """A comma-separated string or a sequence (blanks dropped)."""
        names = value.split(",") if isinstance(value, str) else value
        if not isinstance(names, list | tuple):
            return value
        return tuple(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))

    @field_validator("config", "consumer_config", "producer_config")
    @classmethod
    def _not_own(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Refuse the properties that would break the commit-after-accept guarantee."""
        taken = sorted(set(value) & set(OWN_PROPERTIES))
        if taken:
            raise ValueError(f"{', '.join(taken)} are set by noisyloop (use "
                             f"{ENV_PREFIX}BOOTSTRAP and {ENV_PREFIX}GROUP)")
        return value

    def properties(self, client: Literal["consumer", "producer"]) -> dict[str, Any]:
        """The librdkafka properties of a ``client`` from the settings: the bootstrap
        servers, (a consumer's) :data:`CONSUMER_DEFAULTS`, ``config``, then the client's
        own (``consumer_config`` or ``producer_config``); noisyloop's own (group, commits)
        are added by the client."""
        if client == "consumer":
            return {"bootstrap.servers": self.bootstrap, **CONSUMER_DEFAULTS, **self.config,
                    **self.consumer_config}
        return {"bootstrap.servers": self.bootstrap, **self.config, **self.producer_config}

    @property
    def dead_letters(self) -> str:
        """The dead-letter topic."""
        return self.dead_letter_topic or f"{self.topic}.dead"


def invalid_kafka_settings(exc: ValidationError) -> str:
    """The refused Kafka settings of ``exc``: each environment variable, reason and value."""
    return "; ".join(f"{ENV_PREFIX}{str(err['loc'][0]).upper()}: {err['msg']} "
                     f"(got {err['input']!r})" for err in exc.errors())
