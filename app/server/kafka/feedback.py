"""What becomes of each feedback message of a batch read from Kafka: accepted, duplicate or
dead-lettered (with the reason).

A message is one JSON object: ``tenant_id``, ``model_id`` and the fields of
``POST /v1/models/{model_id}/feedback`` for that model's task.  The messages
of one model go through the HTTP batch path itself
(:func:`app.api.decisions.feedback`: the task's pydantic schema, the
exactly-once event-id join, one Lua call per 1,000 events), in the order
read, so a message read twice (a consumer killed before its commit) is
refused by the join as a duplicate and never applied twice.  Nothing here
knows of Kafka: the consumer (:mod:`app.server.kafka.consumer`) hands the
message values in and commits once every verdict is in.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from app.api import decisions
from app.api.context import ApiContext
from app.api.schemas.feedback import FeedbackBatchRequest
from app.settings import MAX_BATCH

#: The fields of a message that say where its event goes (the rest is the feedback event).
TENANT_FIELD, MODEL_FIELD = "tenant_id", "model_id"
#: The batch path's rejection of an event whose feedback was accepted already.
DUPLICATE_CODE = "duplicate_feedback"
#: ``events[12].click`` -> ``click``: a message's field is named within the message.
_EVENT_PREFIX = re.compile(r"^events\[\d+\]\.?")

T = TypeVar("T")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one message: "accepted", "duplicate" or "dead_lettered" (then the
    error's code, message and field, as an HTTP client would have got them)."""

    outcome: str
    reason: str = ""
    message: str = ""
    field: str | None = None


ACCEPTED = Verdict("accepted")
DUPLICATE = Verdict("duplicate")


async def gather_all(*calls: Awaitable[T]) -> list[T]:
    """The results of ``calls``, run concurrently; the first failure is raised once every
    call has ended (none goes on joining behind a batch that is read again)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]  # no failure among them (checked)


def dead(reason: str, message: str, field: str | None = None) -> Verdict:
    """A dead-lettered message's verdict."""
    return Verdict("dead_lettered", reason, message, field)


def parse_message(value: bytes | None, tenants: Collection[str],
                  ) -> tuple[tuple[str, str], dict[str, Any]] | Verdict:
    """``((tenant, model), feedback event)`` of one message, or why it is dead-lettered
    (not a JSON object, no tenant or model id, a tenant this consumer does not serve)."""
    try:
        doc = orjson.loads(value or b"")
    except orjson.JSONDecodeError as exc:
        return dead("invalid_json", f"the message is not valid JSON: {exc}")
    if not isinstance(doc, dict):
        return dead("invalid_json", "a message is one JSON object (a feedback event)")
    tenant, model = doc.pop(TENANT_FIELD, None), doc.pop(MODEL_FIELD, None)
    if not (isinstance(tenant, str) and tenant and isinstance(model, str) and model):
        name = MODEL_FIELD if isinstance(tenant, str) and tenant else TENANT_FIELD
        return dead("invalid_request", f"{name} is required (a non-empty string)", name)
    if tenants and tenant not in tenants:
        return dead("other_tenant", f"this consumer does not serve tenant {tenant!r} "
                                    "(NOISYLOOP_KAFKA_TENANTS)", TENANT_FIELD)
    return (tenant, model), doc


async def accept_messages(ctx: ApiContext, values: Sequence[bytes | None],
                          tenants: Collection[str] = ()) -> list[Verdict]:
    """The verdict of each message (same order), its feedback joined exactly once.

    The messages of each model keep their order; the models are served
    concurrently.  A store error propagates: then nothing of the batch may
    be committed (what was accepted is refused as a duplicate when read again).
    """
    verdicts: list[Verdict | None] = [None] * len(values)
    groups: dict[tuple[str, str], tuple[list[int], list[dict[str, Any]]]] = {}
    for i, value in enumerate(values):
        parsed = parse_message(value, tenants)
        if isinstance(parsed, Verdict):
            verdicts[i] = parsed
            continue
        group = groups.get(parsed[0])
        if group is None:
            group = groups[parsed[0]] = ([], [])
        group[0].append(i)
        group[1].append(parsed[1])
    results = await gather_all(*(_accept_model(ctx, tenant, model, events)
                                 for (tenant, model), (_, events) in groups.items()))
    for (indices, _), found in zip(groups.values(), results, strict=True):
        for i, verdict in zip(indices, found, strict=True):
            verdicts[i] = verdict
    assert None not in verdicts
    return verdicts  # type: ignore[return-value]  # every message has its verdict (checked)


async def _accept_model(ctx: ApiContext, tenant: str, model: str,
                        events: list[dict[str, Any]]) -> list[Verdict]:
    """The verdicts of the events of one model, joined in batches of up to 1,000 (one Lua
    call each, as ``POST .../feedback`` with ``events``)."""
    view = await ctx.store.models.view(tenant, model)
    if view is None:
        return [dead("unknown_model", f"no model {model!r} of tenant {tenant!r}",
                     "model_id")] * len(events)
    out: list[Verdict] = []
    for start in range(0, len(events), MAX_BATCH):
        chunk = events[start:start + MAX_BATCH]
        _, doc = await decisions.feedback(
            ctx, view, FeedbackBatchRequest.model_construct(events=chunk))
        verdicts = [ACCEPTED] * len(chunk)  # but those the join refused:
        for refused in doc["rejected"]:
            error = refused["error"]
            if error["code"] == DUPLICATE_CODE:
                verdicts[refused["index"]] = DUPLICATE
            else:
                field = _EVENT_PREFIX.sub("", error.get("field") or "") or None
                verdicts[refused["index"]] = dead(error["code"], error["message"], field)
        out += verdicts
    return out
