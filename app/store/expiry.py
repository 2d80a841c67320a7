"""The sweeper's step on many decisions at once: :meth:`EventStore.expire_decision`, pipelined.

Each decision still ends in its own ``expire_decision`` Lua step, so a
feedback and the sweeper can never both end it (both remove the pending
entry atomically); the pipeline only saves round trips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.store import codec
from app.store.events import EventStore
from app.store.keys import ModelKeys
from app.store.util import text


async def expire_many(events: EventStore, mk: ModelKeys, event_ids: Sequence[str], mode: str,
                      default_feedback: Mapping[str, np.ndarray]) -> list[str]:
    """End each overdue decision; per id "expired", "not_due" or "gone"."""
    if not event_ids:
        return []
    blob = codec.encode(default_feedback)
    async with events.redis.pipeline(transaction=False) as pipe:
        for eid in event_ids:
            await events.scripts.run(
                "expire_decision", [mk.context(eid), mk.pending, mk.events, mk.snapshot,
                                    mk.partial(eid)],
                [eid, mode, blob], client=pipe)
        replies: Any = await pipe.execute()
    return [text(r[0]) or "gone" for r in replies]
