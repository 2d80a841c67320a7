"""The Kafka feedback consumer: read a batch, accept it, dead-letter the bad, then commit.

One loop accepts one batch at a time (up to ``batch_size`` messages from any
of the partitions assigned to this member of the consumer group) while the
next one is read:

1. every message gets its verdict (:func:`~app.server.kafka.feedback.accept_messages`:
   the HTTP batch path's validation and exactly-once join), the messages of each
   partition in their order, the partitions concurrently (so that one's events are
   checked while Redis joins another's);
2. the dead-lettered ones are produced to the dead-letter topic (reason in
   the ``noisyloop-reason`` header and in the JSON document), and the
   producer is flushed;
3. only then is the next offset of each partition committed (asynchronously: the
   commits go out in order).

A consumer killed anywhere re-reads from the last commit: the feedback it
had accepted is refused by the join as a duplicate (counted, not
dead-lettered), so nothing is lost or applied twice; a message it had
dead-lettered may be dead-lettered twice (the dead-letter topic is at least
once).  A store or broker failure seeks back to the batch's first offsets
(and drops the batch read ahead) and reads again after ``RETRY_SECONDS``.
Any other error ends the consumer, which :meth:`KafkaFeedbackConsumer.run`
logs, counts (``kafka_consumer_restarts``) and starts again after a back-off,
from the last commit: the batch at hand is read again, its accepted feedback
refused as duplicates.  The client is blocking (confluent-kafka, on
librdkafka): its calls run on one thread of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from app.api.context import ApiContext
from app.metrics import Metrics
from app.server.kafka.feedback import Verdict, accept_messages, gather_all
from app.server.kafka.settings import KafkaSettings
from app.store import STORE_ERRORS

logger = logging.getLogger(__name__)

#: Header of a dead letter naming its reason (also the document's ``reason``).
REASON_HEADER = "noisyloop-reason"
#: Seconds before a batch that met a store or broker failure is read again.
RETRY_SECONDS = 1.0
#: Longest wait for the dead letters of a batch to be written.
FLUSH_SECONDS = 30.0
#: First and longest back-off before a consumer that failed unexpectedly starts again.
RESTART_SECONDS, MAX_RESTART_SECONDS = 1.0, 60.0


class DeadLetterError(Exception):
    """The dead-letter topic did not take a batch's dead letters (nothing is committed)."""


#: Failures after which a batch is read again (nothing of it was committed).
RETRIED: tuple[type[Exception], ...] = (*STORE_ERRORS, KafkaException, DeadLetterError)


def record_lag(metrics: Metrics, stats: str | bytes) -> None:
    """Set the lag gauge of each assigned partition from a librdkafka statistics document."""
    doc = orjson.loads(stats)
    for topic, info in (doc.get("topics") or {}).items():
        for partition, p in (info.get("partitions") or {}).items():
            lag = p.get("consumer_lag", -1)
            if int(partition) >= 0 and lag >= 0:  # -1: the internal partition, lag unknown
                metrics.kafka_lag.labels(topic, partition).set(lag)


def dead_letter(message: Message, verdict: Verdict) -> dict[str, Any]:
    """The dead-letter document of ``message``: why, where it was read, and the message."""
    value = message.value() or b""
    try:
        original: Any = value.decode("utf-8")
    except UnicodeDecodeError:
        original = value.hex()
    return {"reason": verdict.reason, "message": verdict.message, "field": verdict.field,
            "topic": message.topic(), "partition": message.partition(),
            "offset": message.offset(), "value": original}


def by_partition(messages: Sequence[Message]) -> dict[tuple[str, int], list[Message]]:
    """The messages of each ``(topic, partition)``, in the order read."""
    parts: dict[tuple[str, int], list[Message]] = {}
    for m in messages:
        key = (m.topic() or "", m.partition() or 0)
        part = parts.get(key)
        if part is None:
            parts[key] = [m]
        else:
            part.append(m)
    return parts


def next_offsets(parts: dict[tuple[str, int], list[Message]]) -> list[TopicPartition]:
    """The offset to commit per partition: one past the last message read from it."""
    return [TopicPartition(t, p, (ms[-1].offset() or 0) + 1) for (t, p), ms in parts.items()]


def first_offsets(parts: dict[tuple[str, int], list[Message]]) -> list[TopicPartition]:
    """Where to seek to read the messages again: the first offset per partition."""
    return [TopicPartition(t, p, ms[0].offset() or 0) for (t, p), ms in parts.items()]


class KafkaFeedbackConsumer:
    """Feedback from a Kafka topic into the models, exactly once in effect (see the module).

    Parameters
    ----------
    ctx:
        What the API's handlers share (the store, the metrics).
    settings:
        Where to read, where dead letters go, which tenants are served.
    """

    def __init__(self, ctx: ApiContext, settings: KafkaSettings) -> None:
        if settings.bootstrap is None:
            raise ValueError("a Kafka consumer needs settings.bootstrap")
        self.ctx = ctx
        self.settings = settings
        self.metrics = ctx.metrics
        self._counts = {outcome: self.metrics.kafka_messages.labels(outcome)
                        for outcome in ("accepted", "duplicate", "dead_lettered")}
        self._failed: list[str] = []
        self._progressed = False  # a batch was accepted since the consumer (re)started

    def client_config(self) -> dict[str, Any]:
        """The consumer's librdkafka properties (reading from the start of a new group's
        partitions, the lag statistics, then the settings' consumer properties, then the
        group and the manual commits, which the settings refuse to change)."""
        s = self.settings
        return {"client.id": f"noisyloop-{socket.gethostname()}",
                "auto.offset.reset": "earliest",
                "statistics.interval.ms": int(s.stats_seconds * 1000),
                "stats_cb": lambda stats: record_lag(self.metrics, stats),
                **s.properties("consumer"), "group.id": s.group,
                "enable.auto.commit": False, "enable.auto.offset.store": False}

    def producer_config(self) -> dict[str, Any]:
        """The dead-letter producer's librdkafka properties."""
        return {"linger.ms": 5, **self.settings.properties("producer")}

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set (then finish the batch at hand and leave the group).

        An unexpected error is logged and counted, and the consumer starts again
        from the last commit after a back-off (doubling, up to
        ``MAX_RESTART_SECONDS``, while it fails before accepting a batch)."""
        delay = RESTART_SECONDS
        while not stop.is_set():
            self._progressed = False
            try:
                await self._consume(stop)
            except Exception:
                self.metrics.kafka_restarts.inc()
                delay = RESTART_SECONDS if self._progressed else delay
                logger.exception("kafka: the consumer failed; it starts again from the last "
                                 "commit in %.1f s", delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                delay = min(2 * delay, MAX_RESTART_SECONDS)

    async def _consume(self, stop: asyncio.Event) -> None:
        """Read, accept and commit batches until ``stop`` is set (or an unexpected error)."""
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(1, thread_name_prefix="kafka") as pool:
            consumer, producer = await loop.run_in_executor(pool, self._open)
            logger.info("kafka: consuming %s (group %s, dead letters to %s)",
                        self.settings.topic, self.settings.group, self.settings.dead_letters)
            ahead = loop.run_in_executor(pool, self._read, consumer)
            try:
                while not stop.is_set():
                    batch = [m for m in await ahead if self._is_data(m)]
                    # the next batch is read while this one is accepted (never committed first)
                    ahead = loop.run_in_executor(pool, self._read, consumer)
                    if not batch:
                        continue
                    parts = by_partition(batch)
                    if not await self._handle(loop, pool, consumer, producer, parts):
                        unread = [m for m in await ahead if self._is_data(m)]
                        await self._rewind(loop, pool, consumer, by_partition(batch + unread))
                        ahead = loop.run_in_executor(pool, self._read, consumer)
            finally:
                with contextlib.suppress(Exception):  # read, not accepted: read again
                    await ahead
                await loop.run_in_executor(pool, producer.flush, FLUSH_SECONDS)
                await loop.run_in_executor(pool, consumer.close)

    def _open(self) -> tuple[Consumer, Producer]:
        """The consumer, subscribed to the topic, and the dead-letter producer."""
        consumer = Consumer(self.client_config(), logger=logger)
        consumer.subscribe([self.settings.topic], on_revoke=self._forget_partitions)
        return consumer, Producer(self.producer_config(), logger=logger)

    def _read(self, consumer: Consumer) -> list[Message]:
        """The next batch: the first message to come (``poll_seconds`` at most), with those
        already fetched behind it, up to ``batch_size`` (never waiting for a batch to fill:
        librdkafka's ``consume`` of n messages would wait its whole timeout for the n-th)."""
        first = consumer.poll(self.settings.poll_seconds)
        if first is None:
            return []
        more = self.settings.batch_size - 1
        return [first, *consumer.consume(more, 0)] if more else [first]

    @staticmethod
    def _is_data(message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() != KafkaError._PARTITION_EOF:
            logger.warning("kafka: %s", error)
        return False

    def _forget_partitions(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Drop the lag series of partitions this member no longer reads."""
        for tp in partitions:
            with contextlib.suppress(KeyError):
                self.metrics.kafka_lag.remove(tp.topic, str(tp.partition))

    async def _handle(self, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor,
                      consumer: Consumer, producer: Producer,
                      parts: dict[tuple[str, int], list[Message]]) -> bool:
        """Accept, dead-letter, commit one batch; False (nothing committed) on a failure."""
        tenants = self.settings.tenants
        try:
            found = await gather_all(*(accept_messages(self.ctx, [m.value() for m in ms],
                                                       tenants) for ms in parts.values()))
            bad = [(m, v) for ms, verdicts in zip(parts.values(), found, strict=True)
                   for m, v in zip(ms, verdicts, strict=True) if v.outcome == "dead_lettered"]
            if bad:
                await loop.run_in_executor(pool, self._dead_letter, producer, bad)
            # asynchronous: librdkafka sends the commits in order, and one lost (a crash)
            # only makes the next consumer read the batch again, refused as duplicates
            await loop.run_in_executor(
                pool, lambda: consumer.commit(offsets=next_offsets(parts), asynchronous=True))
        except RETRIED as exc:
            logger.warning("kafka: batch of %d messages not committed (%s); read again in "
                           "%.1f s", sum(map(len, parts.values())), exc, RETRY_SECONDS)
            return False
        self._progressed = True
        for outcome, n in Counter(v.outcome for verdicts in found for v in verdicts).items():
            self._counts[outcome].inc(n)
        for reason, n in Counter(v.reason for _, v in bad).items():
            self.metrics.kafka_dead_letters.labels(reason).inc(n)
        return True

    @staticmethod
    async def _rewind(loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor,
                      consumer: Consumer, parts: dict[tuple[str, int], list[Message]]) -> None:
        """Seek back to the first of the messages in each partition (one no longer assigned
        is read again by its new owner, from the last commit) and wait before reading."""
        for tp in first_offsets(parts):
            with contextlib.suppress(KafkaException):
                await loop.run_in_executor(pool, consumer.seek, tp)
        await asyncio.sleep(RETRY_SECONDS)

    def _dead_letter(self, producer: Producer, bad: list[tuple[Message, Verdict]]) -> None:
        """Produce the dead letters and wait until the topic has them all."""
        self._failed = []
        for message, verdict in bad:
            producer.produce(self.settings.dead_letters, key=message.key(),
                             value=orjson.dumps(dead_letter(message, verdict)),
                             headers=[(REASON_HEADER, verdict.reason.encode())],
                             on_delivery=self._delivered)
            producer.poll(0)
        left = producer.flush(FLUSH_SECONDS)
        if left or self._failed:
            raise DeadLetterError(f"{left} dead letters not written, {len(self._failed)} "
                                  f"refused ({'; '.join(self._failed[:3])})")

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed.append(str(error))
