"""Schemas of ``POST /v1/models/{id}/feedback``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, SkipValidation, StrictBool, Tag

from app.api.schemas.common import ErrorDetail, EventId, Index, RequestModel
from app.settings import MAX_BATCH


class LabelFeedback(RequestModel):
    """Feedback of the ``label`` and ``label_set`` tasks.

    Bandit algorithms take ``click`` (the right label was shown / is in the
    shown set, as observed, i.e. possibly noisy); full-information ones
    (``perceptron``, ``mc_slp``) take the true ``label``.
    """

    event_id: EventId
    click: StrictBool | Literal[0, 1] | None = None
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
