"""Readers of logged contexts keep a wide sparse context sparse until they read its ``x``:
a feedback batch of a model with 100,000 features costs the contexts' non-zeros."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from app.learners.config import ModelConfig
from app.store import ModelKeys, Store

WIDTH = 100_000
EVENTS = 200
MK = ModelKeys("t", "wide")


@pytest.fixture
async def store(redis_url: str):
    s = Store.from_url(redis_url)
    await s.tenants.create("t")
    config = ModelConfig.of({"model_id": "wide", "task": "label", "algorithm": "linucb_diag",
                             "n_features": WIDTH, "n_classes": 3, "seed": 0, "uid": "u1"})
    await s.models.create("t", config, {}, 0.0, 0.0)
    yield s
    await s.close()


def _wide_context(k: int) -> dict[str, np.ndarray]:
    x = np.zeros(WIDTH)
    x[k] = 1.0
    return {"x": x, "ids": np.arange(3, dtype=np.int64), "shown": np.array(2)}


async def test_a_batch_of_wide_contexts_is_read_at_the_cost_of_its_non_zeros(
        store: Store) -> None:
    """Reading 200 contexts of 100,000 features and their ids allocates well under one
    dense context's 800 KB per event: the bound, 16 MB, is a tenth of the 160 MB the
    batch took dense (measured: the dense read peaks at 160 MB, this one under 1 MB), and
    each ``x`` read alone is the dense row."""
    mk = MK
    await store.events.record_decisions(
        mk, [(f"e{k}", _wide_context(k)) for k in range(EVENTS)], 60, 60)
    tracemalloc.start()
    try:
        found = await store.events.read_contexts(mk, [f"e{k}" for k in range(EVENTS)])
        ids = [np.asarray(c["ids"]).tolist() for c in found if not isinstance(c, str)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ids == [[0, 1, 2]] * EVENTS
    assert peak < 16e6, peak
    first = found[7]
    assert not isinstance(first, str)
    assert np.flatnonzero(first["x"]).tolist() == [7] and first["x"].shape == (WIDTH,)
