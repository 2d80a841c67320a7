"""What the API's handlers share: the store, the settings, the metrics, the caches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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
    health: Callable[[], str | None] = field(default=lambda: None)
    """What is wrong with the process's own store (None: nothing; see ``/healthz``)."""

    @classmethod
    def open(cls, settings: Settings, store: Store, metrics: Metrics,
             health: Callable[[], str | None] | None = None) -> ApiContext:
        """The context of a process serving ``store``, with empty caches; ``health``: what is
        wrong with a store the process runs itself."""
        ctx = cls(settings, store, metrics, LearnerCache(store, settings.snapshot_cache_size),
                  KeyCache())
        if health is not None:
            ctx.health = health
        return ctx
