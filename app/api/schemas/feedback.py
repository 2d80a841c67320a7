"""Schemas of ``POST /v1/models/{id}/feedback``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, SkipValidation, Tag

from app.api.schemas.common import ErrorDetail, EventId, Index, RequestModel
from app.settings import MAX_BATCH


def _strict_click(value: Any) -> bool:
    """A click is ``true``/``false`` or ``1``/``0`` (no strings, no other numbers)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError("click must be true, false, 1 or 0")


Click = Annotated[bool, BeforeValidator(_strict_click)]


class LabelFeedback(RequestModel):
    """Feedback of the ``label`` and ``label_set`` tasks.

    Bandit algorithms take ``click`` (the right label was shown / is in the
    shown set, as observed, i.e. possibly noisy); full-information ones
    (``perceptron``, ``mc_slp``) take the true ``label``.
    """

    event_id: EventId
    click: Click | None = None
    label: Index | None = None


#: One feedback event of any task (add a task's event model here).
FeedbackEvent = LabelFeedback


class FeedbackBatchRequest(RequestModel):
    """Many events; each is accepted or rejected on its own (validated one by one)."""

    events: list[SkipValidation[FeedbackEvent]] = Field(min_length=1, max_length=MAX_BATCH)


def _feedback_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "<batch>" if "events" in value else "<event>"
    return "<batch>" if isinstance(value, FeedbackBatchRequest) else "<event>"


FeedbackRequest = Annotated[
    Annotated[FeedbackBatchRequest, Tag("<batch>")] | Annotated[FeedbackEvent, Tag("<event>")],
    Discriminator(_feedback_kind),
]


class FeedbackAcceptedResponse(BaseModel):
    """One event accepted (it will be applied by the trainer)."""

    accepted: Literal[True] = True


class RejectedEvent(BaseModel):
    """Why event ``index`` of a batch was rejected."""

    index: int
    error: ErrorDetail


class FeedbackBatchResponse(BaseModel):
    """How many events of a batch were accepted, and which were rejected."""

    accepted: int
    rejected: list[RejectedEvent]
