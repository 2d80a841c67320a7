"""The rank learner's first-slot probabilities: the law its first placement is drawn from."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.rank import RidgeRanker
from tests.learners.test_rank import _play


@pytest.mark.parametrize(("temperature", "anchor_share"), [(0.03, 0.0), (0.03, 0.05),
                                                           (0.0, 0.03)])
def test_first_slot_probabilities_are_those_decide_logs(temperature: float,
                                                        anchor_share: float) -> None:
    """Every candidate's probability, summing to 1, and the chosen one's equal to the
    probability ``decide`` logs for it (same arithmetic: equal to 1e-12)."""
    model = RidgeRanker(n_features=3, n_action_features=2, slots=3, seed=0, epsilon=0.2,
                        temperature=temperature, anchor_share=anchor_share)
    _play(model, 300)
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(50):
        x, A = rng.standard_normal(3), rng.standard_normal((int(rng.integers(1, 8)), 2))
        probs = model.first_slot_probabilities(x, A)
        assert probs.shape == (len(A),) and probs.min() >= 0.2 / len(A) - 1e-12
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
        top = model.decide(x, actions=A).output["ranking"][0]
        assert top["probability"] == pytest.approx(probs[top["index"]], abs=1e-12)
        checked += 1
    assert checked == 50
