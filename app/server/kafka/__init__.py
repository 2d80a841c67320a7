"""Feedback from Kafka: a consumer of feedback events beside the HTTP and WebSocket routes.

:mod:`~app.server.kafka.settings` (``NOISYLOOP_KAFKA_*``),
:mod:`~app.server.kafka.feedback` (each message's verdict, through the HTTP
batch path's join) and :mod:`~app.server.kafka.consumer` (read, accept,
dead-letter, commit); :mod:`~app.server.kafka.decisions` publishes the
decision log to a topic.  ``noisyloop serve`` and ``noisyloop worker`` run it
when ``NOISYLOOP_KAFKA_BOOTSTRAP`` is set (:func:`kafka_roles`); the client
library (confluent-kafka, the ``kafka`` extra) is imported only then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from app.server.kafka.settings import KafkaSettings

if TYPE_CHECKING:
    from app.api.context import ApiContext

Role = Callable[["ApiContext", asyncio.Event], Coroutine[Any, Any, None]]


def kafka_roles(settings: KafkaSettings) -> list[Role]:
    """The Kafka consumer as a background role of the app (and the decision publisher with
    a decisions topic), or none without a bootstrap."""
    if settings.bootstrap is None:
        return []
    # imported here, not in the role: a second of imports would stall the event loop
    from app.server.kafka.consumer import KafkaFeedbackConsumer
    from app.server.kafka.decisions import DecisionPublisher

    async def consume(ctx: ApiContext, stop: asyncio.Event) -> None:
        await KafkaFeedbackConsumer(ctx, settings).run(stop)

    async def publish(ctx: ApiContext, stop: asyncio.Event) -> None:
        await DecisionPublisher(ctx.store, settings).run(stop)

    return [consume] if settings.decisions_topic is None else [consume, publish]
