"""The trainer's model read against a real Redis."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.learners.config import ModelConfig
from app.store import ModelKeys, Store
from app.store.delivery import DeliveryStore

CONFIG = ModelConfig.of({"model_id": "m", "task": "label", "algorithm": "rcnbf",
                         "n_features": 2, "n_classes": 3, "params": {"gamma": 0.05}, "seed": 0,
                         "uid": "u1"})
MK = ModelKeys("t", "m")


async def _calls(store: Store, command: str) -> int:
    stats: Any = await store.redis.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_read_model_reads_config_and_version_in_one_transaction(redis_url: str) -> None:
    """A promotion or rollback changes config and version in one step: the trainer reads
    both in one MULTI/EXEC (still one round trip), never one from before and one after."""
    store = Store.from_url(redis_url)
    try:
        await store.models.create("t", CONFIG, {"W_": np.zeros((3, 2))}, 0.0, 0.0)
        before = await _calls(store, "exec")
        view = await DeliveryStore(store.redis).read_model(MK)
        assert view is not None and view.config.algorithm == "rcnbf"
        assert view.info.version == 1
        assert await _calls(store, "exec") == before + 1
    finally:
        await store.close()
