"""What the API's handlers share: the store, the settings, the metrics, the caches."""

from __future__ import annotations

from dataclasses import dataclass

from app.api.cache import KeyCache, LearnerCache
from app.metrics import Metrics
from app.settings import Settings
from app.store import Store


@dataclass
class ApiContext:
    """Resources opened by the app's lifespan and handed to every handler."""

    settings: Settings
    store: Store
    metrics: Metrics
    cache: LearnerCache
    keys: KeyCache

    @classmethod
    def open(cls, settings: Settings, store: Store, metrics: Metrics) -> ApiContext:
        """The context of a process serving ``store``, with empty caches."""
        return cls(settings, store, metrics, LearnerCache(store, settings.snapshot_cache_size),
                   KeyCache())
