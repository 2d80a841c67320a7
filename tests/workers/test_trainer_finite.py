"""No accepted event makes a weight non-finite: the trainer dead-letters it with the reason."""

from __future__ import annotations

import numpy as np

from app.store import Store
from tests.workers.conftest import create_model, model_config
from tests.workers.test_trainer import expected_state, feed, worker


async def test_an_event_whose_update_overflows_is_dead_lettered_not_applied(
        store: Store) -> None:
    config = model_config()
    mk = await create_model(store, config)
    before = await feed(store, mk, config, 8)
    # logged around the API (which would refuse it): the update W += x h / p overflows
    context = {"x": np.full(6, 1e307), "greedy": np.int64(0), "played": np.int64(1),
               "prob": np.float64(0.025)}
    await store.events.record_decisions(mk, [("huge", context)], 60, 60)
    outcome = await store.events.take_feedback_many(mk, [("huge", {"click": np.array(1.0)})])
    assert outcome[0].status == "ok"
    after = await feed(store, mk, config, 8, seed=1)
    assert await worker(store).drain() == 16
    letters = [fields[b"reason"].decode() for _, fields in
               await store.redis.xrange(mk.dead_letter)]
    assert len(letters) == 1
    assert "non-finite" in letters[0] and "W_" in letters[0], letters
    snap = await store.snapshots.load(mk)
    assert snap is not None and snap.info.events_applied == 16
    assert all(np.isfinite(a).all() for a in snap.state.values())
    np.testing.assert_allclose(snap.state["W_"], expected_state(config, before + after)["W_"],
                               rtol=1e-12, atol=1e-12)

