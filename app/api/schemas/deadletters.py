"""Schemas of the dead-letter routes (list, drop, retry)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: A stream entry id: milliseconds and a sequence number, each of at most 19 digits (Redis
#: refuses parts beyond 2^64 - 1, which has 20; no real id comes near 19).
STREAM_ID_PATTERN = r"^[0-9]{1,19}-[0-9]{1,19}$"
#: Most dead letters in one page.
MAX_PAGE = 1000


class DeadLetterItem(BaseModel):
    """An event the trainer could not apply: where it was, what it held, why and when."""

    entry_id: str = Field(description="Id of the dead letter (what drop and retry take).")
    stream_id: str = Field(description="Id the event had on the model's event stream.")
    event_id: str | None = Field(description="The decision's event id (null if not stored).")
    kind: str | None = Field(
        description="`feedback` (joined feedback) or `timeout` (a decision that expired into "
                    "a default event).")
    reason: str = Field(description="Why the trainer could not apply it.")
    deliveries: int = Field(description="Times it was delivered to a trainer.")
    dead_lettered_at: str = Field(description="When it was moved (UTC, ISO 8601).")
    fields: dict[str, list[int]] | None = Field(
        description="Shape of each field of the event (context and feedback); null when the "
                    "stored event cannot be decoded.")
    feedback: dict[str, Any] | None = Field(
        description="The feedback's fields of at most 64 numbers (non-finite numbers as null); "
                    "null when it cannot be decoded.")


class DeadLetterListResponse(BaseModel):
    """``GET /v1/models/{id}/dead-letters``: one page, oldest first, at most ``limit`` dead
    letters and :data:`~app.store.paging.MAX_PAGE_BYTES` of their JSON."""

    dead_letters: list[DeadLetterItem]
    total: int = Field(description="Dead letters held now (the model's "
                                   "`stats.events_dead_lettered`).")
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the "
                                               "last page.")


class DeadLettersDroppedResponse(BaseModel):
    """``DELETE /v1/models/{id}/dead-letters``."""

    dropped: int


class DeadLetterRetryResponse(BaseModel):
    """``POST .../dead-letters/{entry_id}/retry``: the event is back on the event stream."""

    entry_id: str = Field(description="The dead letter that was retried (now gone).")
    stream_id: str = Field(description="The event's new id on the model's event stream.")
