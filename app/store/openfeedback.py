"""Open decisions (feedback that arrives in parts), label budgets and examples without a decision.

Two tasks may need more feedback for one decision than the client first
sent: a regression model whose label budget asks for ``k`` more noisy labels
(``more_labels``) and a noisy_input round whose plan needs more noisy copies
(``more_copies``); and a model that adds up its feedback (``aggregation``
``sum``) keeps every decision open until its deadline.  Such a decision
stays *open*: its pending entry and context stay, and the feedback received
so far is kept beside it in ``nl:{T:M}:part:E`` (wanted count, received
count, the feedback blob, what to do on expiry, and the blob's observed
reward for the apprentice counters when it has one).
:meth:`OpenFeedbackStore.take_many` moves a batch of decisions forward in
one Lua call (``take_partial.lua``), each with compare-and-set on its
received count and on the label budget's round counter: the caller reads
them with :meth:`OpenFeedbackStore.read_many` (``read_partial.lua``),
computes, and retries the steps that answer ``"conflict"``.

The label budget's strategy state (:mod:`app.learners.budget`) lives in
``nl:{T:M}:budget`` (``rounds`` and the codec blob of its counters), so every
API process charges the same budget.

:meth:`OpenFeedbackStore.add_examples` appends examples that had no prior
decision (noisy_label ``{"features", "label"}``) to the event stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from app.store import codec
from app.store.client import lua_source
from app.store.events import TOMBSTONE, FeedbackOutcome, feedback_outcomes
from app.store.keys import ModelKeys
from app.store.util import text

#: Lua scripts of this module (registered here, run outside pipelines).
OPEN_SCRIPTS = ("read_partial", "take_partial", "add_examples")


@dataclass(frozen=True)
class Partial:
    """Feedback received so far for an open decision."""

    wanted: int
    received: int
    fields: dict[str, np.ndarray]


@dataclass(frozen=True)
class OpenState:
    """What :meth:`OpenFeedbackStore.read_many` found for one event."""

    status: str
    """"ok", "unknown" (no context) or "duplicate" (feedback already joined)."""
    context: Mapping[str, np.ndarray]
    """The logged context, its arrays stored sparse made dense only when read."""
    partial: Partial | None


@dataclass(frozen=True)
class Budget:
    """A model's label budget as read: rounds charged so far and the strategy's state."""

    rounds: int
    state: dict[str, np.ndarray] | None


@dataclass(frozen=True)
class BudgetCharge:
    """A label-budget round to record with the feedback (compare-and-set on ``rounds``)."""

    expected_rounds: int
    state: Mapping[str, np.ndarray]
    rounds: int


@dataclass(frozen=True)
class OpenStep:
    """One event's step for :meth:`OpenFeedbackStore.take_many`.

    ``fields`` is everything received so far; the event is joined when
    ``received >= wanted``, else its decision stays open.  ``expected`` is
    the received count read before (None: no partial feedback may exist
    yet).  ``reward`` is the observed reward of ``fields`` when the decision
    may be an apprentice one (kept with it, for the apprentice counters when
    the decision ends at its deadline with what it received), else None.
    """

    event_id: str
    fields: Mapping[str, np.ndarray]
    wanted: int
    received: int
    expected: int | None
    enqueue_on_expiry: bool
    charge: BudgetCharge | None = None
    reward: float | None = None


class OpenFeedbackStore:
    """Partial feedback of open decisions, label budgets, examples without a decision."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._scripts = {name: redis.register_script(lua_source(name)) for name in OPEN_SCRIPTS}

    async def read_many(self, mk: ModelKeys, event_ids: Sequence[str]
                        ) -> tuple[list[OpenState], Budget]:
        """Each event's context and partial feedback, and the model's label budget, in one
        Lua call (``read_partial.lua``)."""
        keys_ = [mk.label_budget]
        for eid in event_ids:
            keys_ += [mk.context(eid), mk.partial(eid)]
        reply: Any = await self._scripts["read_partial"](keys=keys_)
        states = [_state(reply[i], reply[i + 1:i + 4]) for i in range(2, len(reply), 4)]
        return states, _budget(reply[:2])

    async def take_many(self, mk: ModelKeys, steps: Sequence[OpenStep]) -> list[FeedbackOutcome]:
        """Record each step, in order, in one Lua call.

        Per step: "ok" (joined), "open", "unknown", "duplicate", or
        "conflict" when the received count is not ``expected`` or a budget
        charge's rounds moved (re-read and retry that step).
        """
        if not steps:
            return []
        keys_ = [mk.pending, mk.events, mk.stats, mk.label_budget, mk.asleep]
        args: list[bytes | str | int | float] = [TOMBSTONE]
        blobs = codec.encode_many([step.fields for step in steps])
        for step, blob in zip(steps, blobs, strict=True):
            charge = step.charge
            keys_ += [mk.context(step.event_id), mk.partial(step.event_id)]
            args += [step.event_id, "" if step.expected is None else str(step.expected),
                     "final" if step.received >= step.wanted else "open", blob,
                     int(step.wanted), int(step.received),
                     "enqueue" if step.enqueue_on_expiry else "drop",
                     "" if charge is None else str(charge.expected_rounds),
                     b"" if charge is None else codec.encode(charge.state),
                     0 if charge is None else int(charge.rounds),
                     "" if step.reward is None else repr(float(step.reward))]
        reply: Any = await self._scripts["take_partial"](keys=keys_, args=args)
        return feedback_outcomes(reply)

    async def budget(self, mk: ModelKeys) -> Budget:
        """The model's label budget (rounds 0 and no state before its first charge)."""
        return _budget(await self.redis.hmget(mk.label_budget, ["rounds", "state"]))

    async def add_examples(self, mk: ModelKeys,
                           examples: Sequence[tuple[str, Mapping[str, np.ndarray],
                                                    Mapping[str, np.ndarray]]]) -> list[str]:
        """Append ``(event id, context, feedback)`` examples to the stream; their stream ids."""
        if not examples:
            return []
        args: list[bytes | str | int | float] = []
        for eid, context, feedback in examples:
            args += [eid, codec.encode(context), codec.encode(feedback)]
        reply: Any = await self._scripts["add_examples"](keys=[mk.events, mk.stats, mk.asleep],
                                                          args=args)
        return [text(r) or "" for r in reply]


def _state(ctx: bytes | None, partial: list[bytes | None]) -> OpenState:
    if ctx is None or ctx == TOMBSTONE:
        return OpenState("unknown" if ctx is None else "duplicate", {}, None)
    want, n, blob = partial
    found = (Partial(int(want), int(n), dict(codec.decode(blob)))
             if blob is not None and want is not None and n is not None else None)
    return OpenState("ok", codec.DenseOnRead(ctx), found)


def _budget(reply: Any) -> Budget:
    rounds, state = reply
    return Budget(int(rounds or 0), dict(codec.decode(state)) if state is not None else None)
