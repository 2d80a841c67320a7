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

import numpy as np

from app.api.errors import ApiError
from app.api.schemas.rank import RankFeedback, RankResponse
from app.evaluation.rankings import RANK_POLICIES
from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.tasks.base import Replay, Task


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


def _top_click(fields: Mapping[str, np.ndarray]) -> float:
    return float(fields["clicks"][0])


TASK = Task(
    "rank", "an ordered slate of `slots` items out of candidate actions with features; "
            "feedback: the clicked shown ids, or a graded reward per shown id "
            "(`POST /v1/models/{id}/rank`)",
    RankFeedback, RankResponse, rank_feedback, has_clicks=True, candidates=True,
    join_context=join_shown, reward=_top_click, evaluation_policies=RANK_POLICIES,
    replay=Replay("app.replay.rank", drift=True, service_defaults=True))
