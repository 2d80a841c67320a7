"""Personalizer's multi-slot rank and reward, translated to and from noisyloop's rank task.

A multi-slot rank is one ranking of the loop's rank task: its slots are the positions of
the slate, filled in the order given, slot ``k`` drawing among the actions it does not
exclude and no slot before it took (:meth:`~app.learners.rank.RidgeRanker.decide` with
features and candidates per slot).  Each slot's reward is then the feedback of its
position, so the rank task's per-position bias and click-noise estimates apply to it.

Slot features.  The rank task scores an action from ``[1, a, vec(x a^T)]`` (``x`` the
context, ``a`` the action's features) and logs, per position, the features of the action
shown there.  A slot's features enter the decision for that slot through the action's
features *as seen by the slot*: the action's own named features, the slot's (named
``slot:NAME``) and every product of a slot feature with an action feature (named
``slot:S*A``, value the product of their amounts), hashed together.  The products give
each slot its own preferences among the actions (a slot feature alone adds the same to
every action's score in the slot, so it cannot change which one the slot takes), and
their interactions with the context (``x a^T``) preferences per context and slot.  So
the context stays one vector, as the rank task logs it, and every consumer of the log
(learning, position bias, per-slot noise, evaluation, exports) reads a multi-slot event
as any ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from app.api.decisionrequest import (
    Candidates,
    DecisionOptions,
    DecisionRequest,
    Features,
    SlotCandidates,
)
from app.api.errors import ApiError
from app.api.personalizer import (
    MAX_ACTIONS,
    EventId,
    PersonalizerBody,
    PersonalizerId,
    RankableAction,
    flatten,
)
from app.features import named_term
from app.fields import MAX_NAMED, NamedFeatures

#: Most slots one multi-slot rank fills (the rank task's most; the loop's ``slots`` bound it).
MAX_SLOTS = 100
#: Most products of slot and action features one rank hashes (bounds its work).
MAX_CROSSES = 100_000
#: The prefix of a slot's features among an action's.
SLOT_PREFIX = "slot:"


class Slot(PersonalizerBody):
    """A slot to fill: its id, features, the actions it excludes and its baseline."""

    id: PersonalizerId
    features: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_NAMED)
    excludedActions: list[PersonalizerId] = Field(default_factory=list,
                                                  max_length=MAX_ACTIONS)
    baselineAction: PersonalizerId


class MultiSlotRankRequest(PersonalizerBody):
    """Body of a multi-slot Rank."""

    contextFeatures: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_NAMED)
    actions: list[RankableAction] = Field(min_length=1, max_length=MAX_ACTIONS)
    slots: list[Slot] = Field(min_length=1, max_length=MAX_SLOTS)
    eventId: EventId | None = None
    deferActivation: bool = False


class SlotReward(PersonalizerBody):
    """The reward of one slot."""

    slotId: PersonalizerId
    value: float = Field(ge=0, le=1, allow_inf_nan=False)


class MultiSlotRewardRequest(PersonalizerBody):
    """Body of a multi-slot Reward: a reward per slot (a slot not named gets 0)."""

    reward: list[SlotReward] = Field(min_length=1, max_length=MAX_SLOTS)


def seen_by_slot(action: Mapping[str, float | str], slot: Mapping[str, float | str]
                 ) -> dict[str, float | str]:
    """An action's named features as a slot sees them (module docstring).

    >>> seen_by_slot({"kind": "video", "price": 2.0}, {"size": "large"})
    {'kind': 'video', 'price': 2.0, 'slot:size': 'large', 'slot:size=large*kind=video': 1.0, \
'slot:size=large*price': 2.0}
    """
    out = dict(action)
    terms = [named_term(name, value) for name, value in action.items()]
    for name, value in slot.items():
        out[SLOT_PREFIX + name] = value
        key, amount = named_term(SLOT_PREFIX + name, value)
        for action_key, action_amount in terms:
            out[f"{key}*{action_key}"] = amount * action_amount
    return out


def _check_slots(body: MultiSlotRankRequest, ids: Sequence[str]) -> list[list[bool]]:
    """Which actions each slot allows; 400 naming the field for a slot id given twice, a
    slot that excludes every action or that the slots before it may leave without any, and
    a baseline action that is no action, is excluded by its slot or is another slot's."""
    known = set(ids)
    slot_of: dict[str, int] = {}
    baseline_of: dict[str, str] = {}
    allowed: list[list[bool]] = []
    before: set[str] = set()  # the actions the slots before may take
    for k, slot in enumerate(body.slots):
        if slot.id in slot_of:
            raise ApiError(422, "invalid_slots", f"slot id {slot.id!r} appears twice",
                           f"slots[{k}].id")
        slot_of[slot.id] = k
        excluded = set(slot.excludedActions)
        allows = [i not in excluded for i in ids]
        open_ = {i for i, a in zip(ids, allows, strict=True) if a}
        if not open_:
            raise ApiError(422, "invalid_actions", f"slot {slot.id!r}: every action is "
                           "excluded: at least one must be left to rank",
                           f"slots[{k}].excludedActions")
        if len(open_) <= min(k, len(open_ & before)):
            raise ApiError(422, "invalid_actions", f"slot {slot.id!r} allows "
                           f"{len(open_)} action(s), which the {k} slot(s) before it may all "
                           "take: allow it more", f"slots[{k}].excludedActions")
        before |= open_
        base = slot.baselineAction
        why = ("is not among the actions" if base not in known else
               "is excluded by its slot" if base in excluded else
               f"is the baseline of slot {baseline_of[base]!r} too" if base in baseline_of
               else None)
        if why is not None:
            raise ApiError(422, "invalid_slots", f"baseline action {base!r} {why}: each slot "
                           "needs its own baseline among the actions it allows",
                           f"slots[{k}].baselineAction")
        baseline_of[base] = slot.id
        allowed.append(allows)
    return allowed


def multi_slot_request(body: MultiSlotRankRequest, baseline: bool) -> DecisionRequest:
    """noisyloop's rank of ``body``'s actions into its slots, each slot seeing them with its
    features (module docstring) and allowing those it does not exclude; with ``baseline``
    each slot serves its ``baselineAction`` (apprentice and logging-only modes).  400 naming
    the field for a bad slot (:func:`_check_slots`) or too many feature products."""
    ids = [a.id for a in body.actions]
    allowed = _check_slots(body, ids)
    named = [flatten(a.features, f"actions[{i}].features") for i, a in enumerate(body.actions)]
    slot_named = [flatten(s.features, f"slots[{k}].features") for k, s in enumerate(body.slots)]
    crosses = sum(len(s) for s in slot_named) * sum(len(a) for a in named)
    if crosses > MAX_CROSSES:
        raise ApiError(422, "invalid_features", f"the slots' features times the actions' make "
                       f"{crosses} products, more than {MAX_CROSSES}: send fewer", "slots")
    # the products' names may be longer than a feature name sent: built, not validated
    per_slot: list[list[Features]] = [
        [NamedFeatures.model_construct(named=seen_by_slot(a, s)) for a in named]
        for s in slot_named]
    options = DecisionOptions(explore=True, defer=body.deferActivation, slots=len(body.slots),
                              baseline=[s.baselineAction for s in body.slots] if baseline
                              else None)
    context = NamedFeatures(named=flatten(body.contextFeatures, "contextFeatures"))
    own: list[Features] = [NamedFeatures(named=a) for a in named]
    return DecisionRequest([context], [Candidates(ids, own, SlotCandidates(per_slot, allowed))],
                           [options], False)


def multi_slot_response(event_id: str, slot_ids: Sequence[str],
                        ranking: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Personalizer's multi-slot answer: each slot's id and the action it shows."""
    return {"eventId": event_id,
            "slots": [{"id": s, "rewardActionId": r["id"]}
                      for s, r in zip(slot_ids, ranking, strict=True)]}


def slot_rewards(body: MultiSlotRewardRequest, event_id: str,
                 slots: Sequence[tuple[str, str]]) -> dict[str, float]:
    """The rewards by action id of a multi-slot event whose slots showed ``slots`` (slot id,
    action id); 400 naming the field for a slot the event does not have, or named twice."""
    if not slots:
        raise ApiError(422, "invalid_reward", f"event {event_id!r} was ranked with one slot: "
                       "reward it with reward (events/{eventId}/reward)", "reward")
    action_of = dict(slots)
    out: dict[str, float] = {}
    for i, reward in enumerate(body.reward):
        action = action_of.get(reward.slotId)
        if action is None:
            raise ApiError(422, "invalid_reward", f"event {event_id!r} has no slot "
                           f"{reward.slotId!r}: its slots are {', '.join(action_of)}",
                           f"reward[{i}].slotId")
        if action in out:
            raise ApiError(422, "invalid_reward", f"slot {reward.slotId!r} is rewarded twice",
                           f"reward[{i}].slotId")
        out[action] = reward.value
    return out
