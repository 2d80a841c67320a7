"""The ``rank`` task: an ordered slate of ``slots`` items out of candidate actions with
features (``POST /v1/models/{id}/rank``); feedback: the clicked shown ids, or a graded reward
per shown id.

A decision logs the shown ids as 64-bit hashes per slot (:func:`item_hashes`), so that
feedback naming ids is mapped to slots (:func:`join_shown`) before the exactly-once join;
the request path is :mod:`app.api.ranking`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.errors import ApiError
from app.evaluation.shapes import RANK_SHAPE
from app.fields import EventId, FiniteFloat, RequestModel, exactly_one_of, one_of_schema
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.tasks.base import Replay, Task

#: Most ids one feedback event names (clicked or rewarded).
MAX_FEEDBACK_IDS = 1000
#: Longest action id.
MAX_ACTION_ID_CHARS = 256

ActionId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ACTION_ID_CHARS)]


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


def item_hashes(ids: Sequence[str]) -> np.ndarray:
    """64-bit hashes of action ids (BLAKE2b; stable across processes), as logged per slot.

    >>> item_hashes(["item-14"]) == item_hashes(["item-14"])
    array([ True])
    """
    return np.array([int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(),
                                    "little", signed=True) for i in ids], dtype=np.int64)


def rank_feedback(event: RankFeedback, config: ModelConfig,
                  cls: type[Learner]) -> dict[str, np.ndarray]:
    """The named ids, their hashes, rewards and JSON paths (mapped to slots by
    :func:`join_shown`)."""
    if event.clicks is not None:
        seen: dict[str, int] = {}
        for i, item in enumerate(event.clicks):
            if item in seen:
                raise ApiError(422, "invalid_feedback", f"id {item!r} is listed twice",
                               f"clicks[{i}]")
            seen[item] = i
        ids, rewards = list(event.clicks), [1.0] * len(event.clicks)
        paths = [f"clicks[{i}]" for i in range(len(ids))]
    else:
        assert event.rewards is not None
        ids, rewards = list(event.rewards), list(event.rewards.values())
        paths = [f"rewards.{item}" for item in ids]
    return {"item_ids": item_hashes(ids), "rewards": np.array(rewards, dtype=np.float64),
            "paths": np.array(paths, dtype=str), "names": np.array(ids, dtype=str)}


def join_shown(fields: Mapping[str, np.ndarray],
               context: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{"clicks": one value per slot}`` from the named ids and the logged shown ids; 422
    naming the id's path when it was not shown with this event."""
    logged = np.asarray(context["ids"])
    shown = int(context["shown"])
    slot_of = {int(h): k for k, h in enumerate(logged[:shown])}
    clicks = np.zeros(logged.shape[0])
    for item, reward, path, name in zip(fields["item_ids"], fields["rewards"], fields["paths"],
                                        fields["names"], strict=True):
        slot = slot_of.get(int(item))
        if slot is None:
            raise ApiError(422, "invalid_feedback",
                           f"id {str(name)!r} was not shown with this event", str(path))
        clicks[slot] = reward
    return {"clicks": clicks}


def add_rewards(total: Mapping[str, np.ndarray],
                later: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Two joined feedbacks of one ranking added up per slot, each sum clipped to 1 (the
    graded reward a slot takes: the learners, the position-bias and click-noise estimates
    read a slot's reward as in [0, 1]).

    >>> add_rewards({"clicks": np.array([0.5, 0.0])}, {"clicks": np.array([0.75, 0.25])})
    {'clicks': array([1.  , 0.25])}
    """
    return {"clicks": np.minimum(np.asarray(total["clicks"]) + np.asarray(later["clicks"]),
                                 1.0)}


def _top_click(fields: Mapping[str, np.ndarray]) -> float:
    return float(fields["clicks"][0])


TASK = Task(
    "rank", "an ordered slate of `slots` items out of candidate actions with features; "
            "feedback: the clicked shown ids, or a graded reward per shown id "
            "(`POST /v1/models/{id}/rank`)",
    RankFeedback, RankResponse, rank_feedback, has_clicks=True, candidates=True,
    join_context=join_shown, add_feedback=add_rewards, reward=_top_click, log_shape=RANK_SHAPE,
    replay=Replay("app.replay.rank", drift=True, service_defaults=True))
