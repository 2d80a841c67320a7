"""The slot-0 importance weights of a rank challenger (workers.challengers.first_slot_weights)."""

from __future__ import annotations

import numpy as np

from app.learners.base import stack_events
from app.learners.rank import RidgeRanker
from workers.challengers import first_slot_weights


def _event(first: list[float], candidates: list[list[float]] | None) -> dict[str, np.ndarray]:
    event = {"x": np.ones(2), "actions": np.array([first, [0.0, 0.0]])}
    if candidates is not None:
        event["candidates"] = np.array(candidates)
    return event


def test_weights_match_the_logged_first_item_and_skip_decisions_without_candidates() -> None:
    a, b = [1.0, 0.0], [0.0, 1.0]
    uniform = RidgeRanker(n_features=2, n_action_features=2, slots=2, epsilon=1.0, seed=0)
    batch = stack_events([_event(a, [a, b, b]), _event(a, None), _event(a, [a, a])] * 2000)
    propensity = np.full(6000, 0.5)
    w = first_slot_weights(uniform, batch, propensity)
    # no candidates logged: not scored
    assert np.isnan(w[1::3]).all()
    # two copies of the logged item: either counts half (it cannot tell them apart)
    assert np.allclose(w[2::3], 1.0)
    # one of three candidates: the uniform draw matches a third of the time
    assert set(np.unique(w[0::3])) == {0.0, 2.0}
    assert abs(np.mean(w[0::3] * 0.5) - 1 / 3) < 0.03
