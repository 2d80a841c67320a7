"""Multiclass Perceptron (Crammer & Singer 2003; P1 eq. (2))."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.perceptron import Perceptron
from app.sim.datasets import load_classification


def test_perceptron_update_is_x_times_ey_minus_eyhat() -> None:
    model = Perceptron(n_features=2, n_classes=3)
    x = np.array([0.6, 0.8])
    model.learn_one({**model.decide(x).context, "label": 2})  # greedy 0 at W = 0
    np.testing.assert_array_equal(model.W_, [-x, np.zeros(2), x])
    before = model.W_.copy()
    model.learn_one({**model.decide(x).context, "label": 2})  # now right: no change
    np.testing.assert_array_equal(model.W_, before)


def test_perceptron_converges_on_synsep() -> None:
    X, y = load_classification("synsep", n=3000, seed=5)
    model = Perceptron(n_features=400, n_classes=9)
    mistakes = []
    for _ in range(4):
        errors = 0
        for x, label in zip(X, y, strict=True):
            ctx = model.decide(x).context
            errors += int(ctx["greedy"] != label)
            model.learn_one({**ctx, "label": int(label)})
        mistakes.append(errors)
    assert mistakes[-1] == 0 < mistakes[0]


@pytest.mark.parametrize("label", [-1, 3, 1.5])
def test_perceptron_refuses_bad_labels(label: float) -> None:
    model = Perceptron(n_features=2, n_classes=3)
    with pytest.raises(ParamError, match="label"):
        model.learn_one({**model.decide(np.ones(2)).context, "label": label})
