"""Schemas of ``POST /v1/models/{id}/rank`` and of the ``rank`` task's feedback.

A rank request carries a context (``features``, as for predict) and the
candidate ``actions``, each with an ``id`` chosen by the client and its own
features (``n_action_features``, dense, sparse or named); the answer lists
one candidate per slot with the probability of that placement.  The ranking and the
feedback are the ``rank`` task's (:mod:`app.tasks.rank`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.schemas.common import (
    INTEGRAL,
    RequestModel,
)
from app.api.schemas.predict import DEFER_DESCRIPTION
from app.fields import Features
from app.settings import MAX_BATCH
from app.tasks.rank import ActionId, RankResponse

#: Most candidates of one rank request.
MAX_CANDIDATES = 1000


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


class RankBatchResponse(BaseModel):
    """Rankings of ``requests``, in order."""

    results: list[RankResponse]
