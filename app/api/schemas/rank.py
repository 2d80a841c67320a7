"""Schemas of ``POST /v1/models/{id}/rank`` and of the ``rank`` task's feedback.

A rank request carries a context (``features``, as for predict) and the
candidate ``actions``, each with an ``id`` chosen by the client and its own
features (``n_action_features``, dense, sparse or named); the answer lists
one candidate per slot with the probability of that placement.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.schemas.common import (
    INTEGRAL,
    EventId,
    FiniteFloat,
    RequestModel,
    exactly_one_of,
    one_of_schema,
)
from app.api.schemas.predict import DEFER_DESCRIPTION, Features
from app.settings import MAX_BATCH

#: Most candidates of one rank request.
MAX_CANDIDATES = 1000
#: Most ids one feedback event names (clicked or rewarded).
MAX_FEEDBACK_IDS = 1000
#: Longest action id.
MAX_ACTION_ID_CHARS = 256

ActionId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ACTION_ID_CHARS)]


class RankAction(RequestModel):
    """One candidate: the client's id for it and its features."""

    id: ActionId = Field(description="unique among the request's actions; feedback names it")
    features: Features


class RankRequest(RequestModel):
    """Rank ``actions`` for the context ``features`` into the model's slots (or ``slots``)."""

    features: Features
    actions: list[RankAction] = Field(min_length=1, max_length=MAX_CANDIDATES)
    slots: Annotated[int, Field(strict=True, ge=1), INTEGRAL] | SkipJsonSchema[None] = Field(
        default=None, description="slots to fill, at most the model's (default)")
    explore: bool = Field(default=True, description="false: the greedy ranking, nothing logged "
                                                    "(no event_id, no feedback expected)")
    defer: bool = Field(default=False, description=DEFER_DESCRIPTION)
    baseline: Annotated[list[ActionId], Field(min_length=1, max_length=MAX_CANDIDATES)] | (
        SkipJsonSchema[None]) = Field(
        default=None, description="a model in apprentice mode: the caller's own ranking (action "
                                  "ids, best first, at least as many as the slots filled), "
                                  "served and learned from; ignored in online mode")


class RankBatchRequest(RequestModel):
    """Many rank requests, answered in order."""

    requests: list[RankRequest] = Field(min_length=1, max_length=MAX_BATCH)


def _rank_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "<batch>" if "requests" in value else "<one>"
    return "<batch>" if isinstance(value, RankBatchRequest) else "<one>"


RankBody = Annotated[
    Annotated[RankBatchRequest, Tag("<batch>")] | Annotated[RankRequest, Tag("<one>")],
    Discriminator(_rank_kind),
]


class RankedAction(BaseModel):
    """The candidate placed in one slot."""

    id: str
    slot: int
    probability: float = Field(description="probability of placing this candidate in this slot "
                                           "given the context, the candidates and the slots "
                                           "before it (their product is the ranking's)")
    expected_reward: float = Field(description="the candidate's predicted relevance (click "
                                               "probability in slot 0 without click noise), "
                                               "clipped to [0, 1]")


class RankResponse(BaseModel):
    """One ranking."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    model_version: int
    ranking: list[RankedAction]
    calibration_unreliable: bool = False


class RankBatchResponse(BaseModel):
    """Rankings of ``requests``, in order."""

    results: list[RankResponse]


class RankFeedback(RequestModel):
    """Feedback of the ``rank`` task: the shown ids that were clicked, or graded rewards.

    ``clicks``: every other shown id counts as not clicked (``[]``: none was).
    ``rewards``: a reward in ``[0, 1]`` per shown id (an id not named gets 0).
    """

    model_config = ConfigDict(json_schema_extra=one_of_schema("clicks", "rewards"))

    event_id: EventId
    clicks: Annotated[list[ActionId], Field(max_length=MAX_FEEDBACK_IDS)] | (
        SkipJsonSchema[None]) = None
    rewards: Annotated[dict[ActionId, Annotated[FiniteFloat, Field(ge=0, le=1)]],
                       Field(max_length=MAX_FEEDBACK_IDS)] | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _one_form(self) -> RankFeedback:
        exactly_one_of(self, ("clicks", "rewards"), "give exactly one of 'clicks' (the shown ids "
                       "that were clicked) or 'rewards' ({id: reward in [0, 1]})")
        return self
