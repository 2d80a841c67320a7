"""Banditron (Kakade, Shalev-Shwartz & Tewari 2008; P1 Section 2, eq. (3))."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.learners.base import check_range
from app.learners.linear import BanditronExploration, LoggedOnlyLearner, Terms, check_click


class Banditron(BanditronExploration, LoggedOnlyLearner):
    """Banditron: the multiclass Perceptron under bandit feedback, with uniform exploration.

    Explores with ``P(r) = (1 - gamma) I[r = yhat] + gamma / K``, updates

        W <- W + x ((f / P(ytilde)) e_ytilde - e_yhat)

    with the bandit click ``f = I[ytilde = y]`` (P1 Section 2).  ``E[update] =
    x (e_y - e_yhat)``, the Perceptron update.  In the noisy setting of P1 it
    consumes the noisy click as if it were clean.  LO: the update uses only
    the logged ``x``, greedy ``yhat``, played ``ytilde`` and ``P(ytilde)``
    (never recomputed from the current ``W``: the greedy label may have moved).

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``K``.
    seed:
        Seed of the exploration draws.
    gamma:
        Exploration rate in ``(0, 1)``.

    Attributes
    ----------
    W_:
        ``(K, d)`` weights.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> model = Banditron(n_features=3, n_classes=3, seed=1, gamma=0.2)
    >>> for _ in range(2000):
    ...     y = int(rng.integers(3)); x = np.eye(3)[y]
    ...     ctx = model.decide(x).context
    ...     model.learn_one({**ctx, "click": float(ctx["played"] == y)})
    >>> [model.decide(np.eye(3)[c], explore=False).output["label"] for c in range(3)]
    [0, 1, 2]
    """

    paper = (
        "Kakade, Shalev-Shwartz & Tewari 2008, *Efficient Bandit Algorithms for Online "
        "Multiclass Prediction*, Algorithm 1"
    )

    task = "label"
    feedback_fields = ("click",)

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, gamma: float = 0.05) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0, low_open=True, high_open=True)

    def click_value(self, click: Any) -> Any:
        """The value that replaces the click in the update: the click itself here."""
        return click

    def terms(self, fields: Mapping[str, Any]) -> Terms:
        f = check_click(fields["click"])
        return Terms(fields["played"], self.click_value(f) / fields["prob"], fields["greedy"])
