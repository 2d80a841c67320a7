"""Per-process caches of the request path: ready learners, and verified API key records.

The regular request path reads the model's version with its config (one
pipelined round trip, :meth:`ModelStore.view_with_key`); only when that
version or the config (its SHA-1: a changed config, or a deleted and
re-created model id with a new ``uid``) differs from the cached one is the
snapshot fetched and a learner rebuilt.

The one-round-trip predict (:func:`app.api.deciding.predict_cached`) decides
with a cached learner and a cached key record without reading either first;
its Lua step then logs the decision only if Redis still holds the same key
and model state (:class:`~app.store.events.DecisionGuard`), so neither cache
can serve a revoked key or a changed model: a stale entry costs one fall back
to the regular path, which refreshes it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace

from app.learners.base import Learner
from app.learners.build import SlotAffine, apply_noise_rates, build_learner
from app.learners.config import ModelConfig
from app.store import Store
from app.store.models import ModelStamp, ModelView
from app.store.tenants import KeyRecord

#: Verified API key records kept per process (a few hundred bytes each).
KEY_CACHE_SIZE = 10_000


@dataclass
class CachedModel:
    """A ready learner with the config and the stored state it was built from."""

    config: ModelConfig
    noise: tuple[float, float, bool, SlotAffine | None]
    """The noise rates handed to the learner, whether they are reliable, and the per-slot
    click model (rank models with a published per-slot estimate)."""
    learner: Learner
    stamp: ModelStamp
    """What Redis held when this entry was last checked; ``stamp.version`` is the learner's."""
    challenged: bool = False
    """Whether the model had challengers when this entry was last checked."""

    @property
    def version(self) -> int:
        """The snapshot version the learner was built from."""
        return self.stamp.version


class LearnerCache:
    """LRU of ``(tenant, model) -> learner at a version``."""

    def __init__(self, store: Store, size: int) -> None:
        self.store = store
        self.size = size
        self._entries: OrderedDict[tuple[str, str], CachedModel] = OrderedDict()

    async def get(self, view: ModelView) -> tuple[Learner, int] | None:
        """The learner of ``view`` and its version; None when the model vanished."""
        key = (view.tenant, view.config.model_id)
        noise = ((view.noise.rho0, view.noise.rho1, view.noise.rates_reliable,
                  view.noise.slot_affine) if view.noise else (0.0, 0.0, True, None))
        entry = self._entries.get(key)
        if (entry is None or entry.stamp.config_sha1 != view.stamp.config_sha1
                or entry.version < view.version):
            found = await self.store.models.snapshot_with_config(view.keys)
            if found is None:
                return None
            snap, config_raw = found
            config, stamp = view.config, replace(view.stamp, version=snap.version)
            sha1 = hashlib.sha1(config_raw).hexdigest()
            if sha1 != stamp.config_sha1:  # changed since the view was read (a promotion)
                config, stamp = ModelConfig.from_json(config_raw), replace(stamp, config_sha1=sha1)
            entry = CachedModel(config, noise,
                                build_learner(config, snap.state, noise[:2],
                                              version=snap.version, noise_reliable=noise[2],
                                              slot_noise=noise[3]),
                                stamp, view.challenged)
            self._entries[key] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        else:
            if entry.noise != noise:
                apply_noise_rates(entry.learner, *noise)  # rho0, rho1, reliable, slot_noise
                entry.noise = noise
            entry.stamp = replace(view.stamp, version=entry.version)
            entry.challenged = view.challenged
        self._entries.move_to_end(key)
        return entry.learner, entry.version

    def peek(self, tenant: str, model_id: str) -> CachedModel | None:
        """The cached entry as it is (no round trip; it may be stale)."""
        return self._entries.get((tenant, model_id))

    def forget(self, tenant: str, model_id: str) -> None:
        """Drop a model (deleted or reset)."""
        self._entries.pop((tenant, model_id), None)


class KeyCache:
    """``key id -> verified key record`` (the salt and hash to verify a secret in-process),
    bounded: the record verified longest ago goes first."""

    def __init__(self, size: int = KEY_CACHE_SIZE) -> None:
        self.size = size
        self._records: OrderedDict[str, KeyRecord] = OrderedDict()

    def remember(self, record: KeyRecord) -> None:
        """Keep a record that Redis just verified."""
        self._records[record.key_id] = record
        self._records.move_to_end(record.key_id)
        while len(self._records) > self.size:
            self._records.popitem(last=False)

    def get(self, key_id: str) -> KeyRecord | None:
        """The cached record of ``key_id`` (it may have been revoked since)."""
        return self._records.get(key_id)
