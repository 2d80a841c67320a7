"""Decisions out: each model's decision log published to a Kafka topic as it is written.

Every ``poll_seconds``, for each model (of the tenants served), the log
entries after the model's published mark are read, each of their records
(an applied event with its decision context and feedback, or a marker, as
``GET /v1/models/{id}/log`` gives them, plus ``tenant_id`` and ``model_id``)
is produced keyed by its event id, the producer is flushed, and only then
does the mark move (``nl:{T:M}:log-published``).  So a record is published
at least once: a publisher stopped between the flush and the mark publishes
the same entries again.  Run it in one process (several would each publish).

A model without a mark (never published) is published from the time
publishing first began (``nl:{kafka}:decisions-since``, kept across
restarts): the decision log stored before the topic was set is not published
(a data directory of months would otherwise flood the topic at start), and a
model created later, or while the publisher was down, is published whole.
``decisions_from_start`` publishes such a model's whole stored log instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from app.server.kafka.settings import KafkaSettings
from app.store import STORE_ERRORS, Store
from app.store.keys import ModelKeys
from app.store.logrecords import entry_records

logger = logging.getLogger(__name__)

#: Log entries read per model and pass: an entry holds one published batch, up to 8,000
#: events (the trainer's largest read), so a pass stays within the producer's queue
#: (100,000 messages by default).
ENTRIES_PER_PASS = 10
#: Failures after which a pass is tried again (the marks of what was not written stay).
RETRIED: tuple[type[Exception], ...] = (*STORE_ERRORS, KafkaException)
#: Longest wait for a pass's records to be written.
FLUSH_SECONDS = 30.0


class DecisionPublisher:
    """Publishes every model's decision log to ``settings.decisions_topic`` (see the module)."""

    def __init__(self, store: Store, settings: KafkaSettings) -> None:
        if settings.bootstrap is None or settings.decisions_topic is None:
            raise ValueError("publishing decisions needs settings.bootstrap and "
                             "settings.decisions_topic")
        self.store = store
        self.settings = settings
        self.topic = settings.decisions_topic
        self._failed: list[str] = []
        self._since: str | None = "-" if settings.decisions_from_start else None

    async def run(self, stop: asyncio.Event) -> None:
        """Publish until ``stop`` is set, sleeping ``poll_seconds`` after a pass with nothing."""
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(1, thread_name_prefix="kafka-decisions") as pool:
            producer = await loop.run_in_executor(pool, self._open)
            try:
                while not stop.is_set():
                    try:
                        published = await self.publish_pass(loop, pool, producer)
                    except RETRIED as exc:
                        logger.warning("kafka decisions: pass failed (%s); trying again", exc)
                        published = 0
                    if not published:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stop.wait(), self.settings.poll_seconds)
            finally:
                await loop.run_in_executor(pool, producer.flush, FLUSH_SECONDS)

    def _open(self) -> Producer:
        return Producer({"linger.ms": 5, **self.settings.properties("producer")},
                        logger=logger)

    async def publish_pass(self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor,
                           producer: Producer) -> int:
        """Publish the new entries of every model; the number of records published."""
        total = 0
        tenants = self.settings.tenants
        if self._since is None:
            self._since = await self.store.log.publishing_since()
        for tenant, model in await self.store.models.all_models():
            if tenants and tenant not in tenants:
                continue
            mk = ModelKeys(tenant, model)
            mark = await self.store.log.published(mk)
            entries = await self.store.log.read(
                mk, start=self._since if mark is None else f"({mark}", count=ENTRIES_PER_PASS)
            if not entries:
                continue
            records = [{"tenant_id": tenant, "model_id": model, **record}
                       for entry in entries for record in entry_records(entry)]
            await loop.run_in_executor(pool, self._produce, producer, records)
            await self.store.log.set_published(mk, entries[-1].entry_id)
            total += len(records)
        return total

    def _produce(self, producer: Producer, records: list[dict[str, Any]]) -> None:
        """Produce ``records`` and wait until the topic has them all (KafkaException if not)."""
        self._failed = []
        for record in records:
            event_id = record.get("event_id")
            producer.produce(self.topic, key=event_id.encode() if event_id else None,
                             value=orjson.dumps(record), on_delivery=self._delivered)
            producer.poll(0)
        left = producer.flush(FLUSH_SECONDS)
        if left or self._failed:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT,
                                            f"{left} records not written, {len(self._failed)} "
                                            f"refused"))

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed.append(str(error))
