"""Schemas of ``POST /v1/models/{id}/feedback``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SkipValidation,
    Tag,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.schemas.common import (
    ClassIndex,
    ErrorDetail,
    EventId,
    FiniteFloat,
    RequestModel,
    exactly_one_of,
    one_of_schema,
)
from app.api.schemas.predict import Features
from app.api.schemas.rank import RankFeedback
from app.settings import MAX_BATCH


def _strict_click(value: Any) -> bool:
    """A click is a JSON boolean: a string or a number (``1``/``0`` included) is never taken
    for one."""
    if isinstance(value, bool):
        return value
    raise ValueError("click must be true or false (a JSON boolean, not a number or a string)")


Click = Annotated[bool, BeforeValidator(_strict_click)]


class LabelFeedback(RequestModel):
    """Feedback of the ``label`` and ``label_set`` tasks.

    Bandit algorithms take ``click`` (the right label was shown / is in the
    shown set, as observed, i.e. possibly noisy); full-information ones
    (``perceptron``, ``mc_slp``) take the true ``label``.
    """

    event_id: EventId
    click: Click | None = None
    label: ClassIndex | None = None


#: Most noisy labels or noisy copies in one feedback event.
MAX_PARTS = 1000


class RegressionFeedback(RequestModel):
    """Feedback of the ``regression`` task: one or more noisy labels of the target.

    When the model's label budget wants more labels for this event, the 202
    response carries ``more_labels: k``; send them with the same
    ``event_id`` (``{"event_id", "values": [...]}``) until none is wanted.
    """

    event_id: EventId
    values: list[FiniteFloat] = Field(min_length=1, max_length=MAX_PARTS,
                                      description="noisy labels of the event's target")
    variance: FiniteFloat | None = Field(
        default=None, ge=0, description="known noise variance of each label (omit if unknown); "
                                        "a later part of the same event must repeat it or omit it")


class NoisyLabelFeedback(RequestModel):
    """Feedback of the ``noisy_label`` task: a class label, as the noise source gave it.

    Either for a prediction (``event_id``) or a standalone example
    (``features``, no prior prediction needed).  A gold example
    (``"gold": true``) carries the checked, correct class in ``label`` and
    the label the noise source gave for the same example in
    ``noisy_label``; UMA estimates the confusion matrix from these pairs
    (and needs ``noisy_label``; the ``perceptron`` learns from ``label``).
    """

    model_config = ConfigDict(json_schema_extra=one_of_schema("event_id", "features"))

    event_id: EventId | SkipJsonSchema[None] = None
    features: Features | SkipJsonSchema[None] = None
    label: ClassIndex
    gold: bool = Field(default=False, strict=True,
                       description="true: `label` is known to be the correct class")
    noisy_label: ClassIndex | None = Field(default=None, description="gold examples: the label the "
                                                                "noise source gave")

    @model_validator(mode="after")
    def _one_source(self) -> NoisyLabelFeedback:
        exactly_one_of(self, ("event_id", "features"),
                       "give exactly one of 'event_id' (feedback for a prediction) "
                       "or 'features' (an example without a prediction)")
        return self


class NoisyInputFeedback(RequestModel):
    """Feedback of the ``noisy_input`` task: the target and further noisy copies of the instance.

    The round needs ``copies_needed`` copies (told by predict).  When fewer
    arrive, the 202 response carries ``more_copies: k`` and the decision
    stays open; send the rest with the same ``event_id`` (``target`` may then
    be omitted).
    """

    event_id: EventId
    target: FiniteFloat | None = Field(default=None, description="required with the first "
                                                                 "part of an event")
    copies: list[list[FiniteFloat]] = Field(default_factory=list, max_length=MAX_PARTS,
                                            description="noisy copies, each of n_features")


#: One feedback event of any task (add a task's event model here).  Each
#: event is validated with the model of its model's task (see
#: :mod:`app.tasks`), so the union only documents the shapes.
FeedbackEvent = (LabelFeedback | RegressionFeedback | NoisyLabelFeedback | NoisyInputFeedback
                 | RankFeedback)


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
