"""Schemas of ``POST /v1/models/{id}/feedback``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, SkipValidation, Tag

from app.api.schemas.common import ErrorDetail, RequestModel
from app.settings import MAX_BATCH
from app.tasks import feedback_union

#: One feedback event of any task (each task's feedback model, from the registry).  Each
#: event is validated with the model of its model's task (see :mod:`app.tasks`), so the
#: union only documents the shapes.
if TYPE_CHECKING:  # a union built at run time: mypy sees a model
    FeedbackEvent = BaseModel
else:
    FeedbackEvent = feedback_union()


class FeedbackBatchRequest(RequestModel):
    """Many events; each is accepted or rejected on its own (validated one by one)."""

    events: list[SkipValidation[FeedbackEvent]] = Field(min_length=1, max_length=MAX_BATCH)


def _feedback_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "<batch>" if "events" in value else "<event>"
    return "<batch>" if isinstance(value, FeedbackBatchRequest) else "<event>"


FeedbackRequest = Annotated[
    Annotated[FeedbackBatchRequest, Tag("<batch>")]
    | Annotated[SkipValidation[FeedbackEvent], Tag("<event>")],
    Discriminator(_feedback_kind),
]


class FeedbackAcceptedResponse(BaseModel):
    """One event accepted (it will be applied by the trainer).

    ``more_labels`` (regression) / ``more_copies`` (noisy_input): the
    decision stays open until that many more labels / copies arrive for it.
    """

    accepted: Literal[True] = True
    more_labels: int | None = None
    more_copies: int | None = None


class RejectedEvent(BaseModel):
    """Why event ``index`` of a batch was rejected."""

    index: int
    error: ErrorDetail


class OpenEvent(BaseModel):
    """An accepted event of a batch whose decision waits for more labels or copies."""

    index: int
    event_id: str
    more_labels: int | None = None
    more_copies: int | None = None


class FeedbackBatchResponse(BaseModel):
    """How many events of a batch were accepted, which were rejected, which wait for more."""

    accepted: int
    rejected: list[RejectedEvent]
    open: list[OpenEvent] = Field(default_factory=list)
