"""Open decisions (feedback that arrives in parts), label budgets and examples without a decision.

Two tasks may need more feedback for one decision than the client first
sent: a regression model whose label budget asks for ``k`` more noisy labels
(``more_labels``) and a noisy_input round whose plan needs more noisy copies
(``more_copies``).  Such a decision stays *open*: its pending entry and
context stay, and the feedback received so far is kept beside it in
``nl:{T:M}:part:E`` (wanted count, received count, the feedback blob, what
to do on expiry).  :meth:`OpenFeedbackStore.take` moves one decision forward
in one Lua step (``take_partial.lua``) with compare-and-set on the received
count and on the label budget's round counter: the caller reads with
:meth:`OpenFeedbackStore.read`, computes, and retries on ``"conflict"``.

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
from app.store.events import TOMBSTONE, FeedbackOutcome
from app.store.keys import ModelKeys
from app.store.util import text

#: Lua scripts of this module (registered here, run outside pipelines).
OPEN_SCRIPTS = ("take_partial", "add_examples")


@dataclass(frozen=True)
class Partial:
    """Feedback received so far for an open decision."""

    wanted: int
    received: int
    fields: dict[str, np.ndarray]


@dataclass(frozen=True)
class OpenState:
    """What :meth:`OpenFeedbackStore.read` found for one event."""

    status: str
    """"ok", "unknown" (no context) or "duplicate" (feedback already joined)."""
    context: dict[str, np.ndarray]
    partial: Partial | None
    budget_rounds: int
    budget_state: dict[str, np.ndarray] | None


@dataclass(frozen=True)
class BudgetCharge:
    """A label-budget round to record with the feedback (compare-and-set on ``rounds``)."""

    expected_rounds: int
    state: Mapping[str, np.ndarray]
    rounds: int


class OpenFeedbackStore:
    """Partial feedback of open decisions, label budgets, examples without a decision."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._scripts = {name: redis.register_script(lua_source(name)) for name in OPEN_SCRIPTS}

    async def read(self, mk: ModelKeys, event_id: str, budget: bool = False) -> OpenState:
        """Context, partial feedback and (``budget=True``) the label budget, in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(mk.context(event_id))
            pipe.hmget(mk.partial(event_id), ["want", "n", "f"])
            if budget:
                pipe.hmget(mk.label_budget, ["rounds", "state"])
            replies: list[Any] = await pipe.execute()
        ctx, (want, n, blob) = replies[0], replies[1]
        rounds, state = replies[2] if budget else (None, None)
        if ctx is None or ctx == TOMBSTONE:
            return OpenState("unknown" if ctx is None else "duplicate", {}, None, 0, None)
        partial = (Partial(int(want), int(n), dict(codec.decode(blob)))
                   if blob is not None and want is not None and n is not None else None)
        return OpenState("ok", dict(codec.decode(ctx)), partial, int(rounds or 0),
                         dict(codec.decode(state)) if state is not None else None)

    async def take(self, mk: ModelKeys, event_id: str, fields: Mapping[str, np.ndarray], *,
                   wanted: int, received: int, expected: int | None, enqueue_on_expiry: bool,
                   charge: BudgetCharge | None = None) -> FeedbackOutcome:
        """Record ``fields`` (everything received so far) for an open decision.

        When ``received >= wanted`` the event is joined (status "ok"), else
        the decision stays open ("open").  ``expected`` is the received
        count read before (None: no partial feedback may exist yet); a
        mismatch, or a budget whose rounds moved, gives "conflict".
        """
        args: list[bytes | str | int | float] = [
            event_id, TOMBSTONE, "" if expected is None else str(expected),
            "final" if received >= wanted else "open", codec.encode(fields), int(wanted),
            int(received), "enqueue" if enqueue_on_expiry else "drop",
            "" if charge is None else str(charge.expected_rounds),
            b"" if charge is None else codec.encode(charge.state),
            0 if charge is None else int(charge.rounds)]
        reply: Any = await self._scripts["take_partial"](
            keys=[mk.context(event_id), mk.pending, mk.events, mk.stats, mk.partial(event_id),
                  mk.label_budget], args=args)
        return FeedbackOutcome(text(reply[0]) or "unknown",
                               text(reply[1]) if len(reply) > 1 else None)

    async def budget(self, mk: ModelKeys) -> tuple[int, dict[str, np.ndarray] | None]:
        """``(rounds, strategy state or None)`` of the model's label budget."""
        reply: Any = await self.redis.hmget(mk.label_budget, ["rounds", "state"])
        rounds, state = reply
        return int(rounds or 0), dict(codec.decode(state)) if state is not None else None

    async def add_examples(self, mk: ModelKeys,
                           examples: Sequence[tuple[str, Mapping[str, np.ndarray],
                                                    Mapping[str, np.ndarray]]]) -> list[str]:
        """Append ``(event id, context, feedback)`` examples to the stream; their stream ids."""
        if not examples:
            return []
        args: list[bytes | str | int | float] = []
        for eid, context, feedback in examples:
            args += [eid, codec.encode(context), codec.encode(feedback)]
        reply: Any = await self._scripts["add_examples"](keys=[mk.events, mk.stats], args=args)
        return [text(r) or "" for r in reply]
