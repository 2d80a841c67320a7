"""Multiclass Perceptron (Crammer & Singer 2003; P1 eq. (2)): full information."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from app.learners.base import Decision
from app.learners.linear import LoggedOnlyLearner, Terms, check_label, own_input


class Perceptron(LoggedOnlyLearner):
    """Multiclass Perceptron: ``W <- W + x (e_y - e_yhat)`` every round (P1 eq. (2)).

    Full information: the feedback is the true ``label``.  The update is zero
    when the logged greedy label ``yhat = argmax W x`` (ties to the lowest
    index) was right, and depends only on logged quantities (LO).

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``K``.
    seed:
        Unused (the Perceptron does not randomise); kept for the common
        constructor.

    Attributes
    ----------
    W_:
        ``(K, d)`` weights.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = Perceptron(n_features=2, n_classes=2)
    >>> for _ in range(200):
    ...     y = int(rng.integers(2)); x = np.array([1.0, 2.0 * y - 1.0])
    ...     model.learn_one({**model.decide(x).context, "label": y})
    >>> model.decide(np.array([1.0, 1.0])).output["label"]
    1
    """

    paper = (
        "Crammer & Singer 2003, *Ultraconservative Online Algorithms for Multiclass "
        "Problems* (the multiclass Perceptron)"
    )

    task = "label"
    feedback_fields = ("label",)

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        xv = own_input(x, self.n_features)
        greedy = int(self.W_.dot(xv).argmax())
        context: dict[str, Any] = {"x": xv, "greedy": greedy, "played": greedy, "prob": 1.0}
        output: dict[str, Any] = {"label": greedy, "probability": 1.0, "greedy_label": greedy}
        return Decision(output=output, context=context)

    def terms(self, fields: Mapping[str, Any]) -> Terms:
        return Terms(check_label(fields["label"], self.n_classes), 1.0, fields["greedy"])
