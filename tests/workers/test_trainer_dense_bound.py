"""The trainer applies a wide model's batch in parts of at most ``max_dense_cells`` dense
cells, with the state of the batch learned at once."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from app.features import span_rows
from app.learners.base import Batch, Learner, batch_size
from app.learners.build import build_learner
from app.store import ModelKeys, Store
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, model_config
from tests.workers.test_trainer import expected_state, feed
from workers import trainer
from workers.context import WorkerContext
from workers.nrest import buffer_size
from workers.worker import Worker

WIDTH = 100_000
EVENTS = 200
#: The bound of these tests: 10 rows of WIDTH (8 MB of float64).
CELLS = 10 * WIDTH


def _worker(store: Store) -> Worker:
    return Worker(store, WorkerSettings(roles=("trainer",), worker_id="w1",
                                        nrest_threads=True, batch_size=64,
                                        max_dense_cells=CELLS))


async def _feed_wide(store: Store, mk: ModelKeys, n: int) -> list[dict[str, np.ndarray]]:
    """``n`` decisions on contexts of one non-zero each (distinct features) with a click
    each; the joined events."""
    config = model_config(n_features=WIDTH)
    learner = build_learner(config)
    logged = []
    for i in range(n):
        x = np.zeros(WIDTH)
        x[(7919 * i) % WIDTH] = 1.0 + i % 3
        logged.append((f"w{i}", learner.decide(x).context))
    await store.events.record_decisions(mk, logged, 60, 60)
    clicks = [float(i % 2) for i in range(n)]
    # packed in stream entries of at most one part, as the API joins a wide model's batch
    outcomes = await store.events.take_feedback_many(
        mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks, strict=True)],
        per_entry=span_rows(WIDTH, CELLS))
    assert all(o.status == "ok" for o in outcomes)
    return [{**ctx, "click": np.array(c)} for (_, ctx), c in zip(logged, clicks, strict=True)]


async def test_trainer_learns_a_wide_batch_in_parts_within_the_bound(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # a narrow model's step first: the imports and compilations of the first step are
    # not the wide batch's
    warm = model_config("warm")
    await feed(store, await create_model(store, warm), warm, 10)
    assert await _worker(store).drain() == 10
    config = model_config(n_features=WIDTH)
    mk = await create_model(store, config)
    events = await _feed_wide(store, mk, EVENTS)
    sizes: list[int] = []
    learn = trainer.learn_finite

    def counted(learner: Learner, batch: Batch) -> None:
        sizes.append(batch_size(batch))
        learn(learner, batch)

    monkeypatch.setattr(trainer, "learn_finite", counted)
    worker = _worker(store)
    tracemalloc.start()
    try:
        applied = await worker.drain()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert applied == EVENTS
    # Arrays of one part (rows x WIDTH float64, 8 MB) live at once: its decoded rows and
    # their stack, the anchor hook's copy of its observed rows, and one part of slack; and
    # arrays of the model's width, whatever the batch: W (4 x WIDTH) and its copies in the
    # publish (get_state's, the encoding, the snapshot read back), the anchor scorer's
    # two ridge vectors and their copies: 24 x WIDTH float64 in all.  Unbounded, the
    # reads of 64 and 128 entries are 51 and 102 MB dense, each made twice (rows, stack).
    tolerance = 4 * CELLS * 8 + 24 * WIDTH * 8
    assert peak <= tolerance, f"peak {peak:,} B > {tolerance:,} B"
    rows = CELLS // WIDTH
    assert sum(sizes) == EVENTS and max(sizes) == rows
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == EVENTS
    for name, arr in expected_state(config, events).items():
        # each feature is touched by one event: the sums of parts are exact
        np.testing.assert_array_equal(snap.state[name], arr)


def test_nrest_buffer_of_a_wide_model_holds_at_most_the_bound() -> None:
    """A fit reads its model's whole NREst buffer dense: a wide model keeps fewer."""
    ctx = cast(WorkerContext, SimpleNamespace(config=WorkerSettings(max_dense_cells=CELLS)))
    wide = model_config(algorithm="linucb_diag", n_features=WIDTH, params={})
    assert buffer_size(ctx, wide) == CELLS // WIDTH  # unbounded: nrest_buffer, 5,000
    assert buffer_size(ctx, model_config(algorithm="linucb_diag", params={})) == \
        ctx.config.nrest_buffer
    assert buffer_size(ctx, model_config(algorithm="rcine", params={"n_s": 40})) == 40
