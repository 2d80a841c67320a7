"""The trainer's side of kept versions: after a publish, ask the store to keep the model's
version once its interval has passed (:mod:`app.store.versions`).

The trainer publishes after every batch; asking Redis each time would add a
round trip to every batch, so each worker waits out the model's interval
itself first (the Lua step checks it again against the newest kept version,
which another worker or an explicit change may have kept meanwhile).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from app.store.keys import ModelKeys
from app.store.versions import VersionPolicy, VersionStore

if TYPE_CHECKING:
    from workers.context import ModelRef


class VersionKeeper:
    """When this worker next asks the store to keep each model's version."""

    def __init__(self) -> None:
        self._due: dict[ModelRef, float] = {}

    async def published(self, store: VersionStore, ref: ModelRef, config: dict[str, Any],
                        version: int) -> None:
        """``version`` of ``ref`` was just published: keep it if the model's interval is up."""
        policy = VersionPolicy.of(config)
        now = time.monotonic()
        if policy.kept == 0 or now < self._due.get(ref, -math.inf):
            return
        self._due[ref] = now + policy.interval_seconds
        await store.keep(ModelKeys(*ref), policy, expected_version=version)

    def forget(self, ref: ModelRef) -> None:
        """Drop what is known of ``ref`` (its lease is gone)."""
        self._due.pop(ref, None)
