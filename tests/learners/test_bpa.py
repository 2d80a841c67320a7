"""Bandit Passive-Aggressive (after Zhong & Daucé 2015; docs/algorithms.md, ``bpa``)."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.bpa import BanditPA


@pytest.mark.parametrize("click, target", [(1.0, 1.0), (0.0, -1.0)])
def test_bpa_moves_played_score_to_margin(click: float, target: float) -> None:
    model = BanditPA(n_features=3, n_classes=4, gamma=0.5)
    x = np.array([0.3, -1.2, 2.0])
    event = {"x": x, "greedy": 0, "played": 2, "prob": 0.125, "click": click}
    model.learn_one(event)
    assert model.W_[2] @ x == pytest.approx(target, rel=1e-12)
    np.testing.assert_array_equal(np.delete(model.W_, 2, axis=0), 0.0)
    before = model.W_.copy()
    model.learn_one(event)  # margin reached: passive
    np.testing.assert_allclose(model.W_, before, atol=1e-15)


def test_bpa_skips_zero_input_and_refuses_bad_gamma() -> None:
    model = BanditPA(n_features=2, n_classes=3)
    model.learn_one({"x": np.zeros(2), "greedy": 0, "played": 1, "prob": 0.5, "click": 1.0})
    np.testing.assert_array_equal(model.W_, 0.0)
    with pytest.raises(ParamError, match="gamma"):
        BanditPA(n_features=2, n_classes=3, gamma=1.0)
