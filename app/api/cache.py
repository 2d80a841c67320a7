"""Per-process cache of ready learners, refreshed when a model's version changes.

The request path reads the model's version with its config (one pipelined
round trip, :meth:`ModelStore.view_with_key`); only when that version (or
the model's ``uid``: a deleted and re-created id) differs from the cached
one is the snapshot fetched and a learner rebuilt.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from app.learners.base import Learner
from app.learning import apply_noise_rates, build_learner
from app.store import Store
from app.store.models import ModelView


@dataclass
class _Entry:
    uid: str
    version: int
    noise: tuple[float, float]
    learner: Learner


class LearnerCache:
    """LRU of ``(tenant, model) -> learner at a version``."""

    def __init__(self, store: Store, size: int) -> None:
        self.store = store
        self.size = size
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    async def get(self, view: ModelView) -> tuple[Learner, int] | None:
        """The learner of ``view`` and its version; None when the model vanished."""
        key = (view.tenant, view.config["model_id"])
        noise = (view.noise.rho0, view.noise.rho1) if view.noise else (0.0, 0.0)
        entry = self._entries.get(key)
        if entry is None or entry.uid != view.config["uid"] or entry.version < view.version:
            snap = await self.store.snapshots.load(view.keys)
            if snap is None:
                return None
            entry = _Entry(view.config["uid"], snap.version, noise,
                           build_learner(view.config, snap.state, noise, version=snap.version))
            self._entries[key] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        elif entry.noise != noise:
            apply_noise_rates(entry.learner, *noise)
            entry.noise = noise
        self._entries.move_to_end(key)
        return entry.learner, entry.version

    def forget(self, tenant: str, model_id: str) -> None:
        """Drop a model (deleted or reset)."""
        self._entries.pop((tenant, model_id), None)
