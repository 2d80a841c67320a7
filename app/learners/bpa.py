"""Bandit Passive-Aggressive, BPA (after Zhong & Daucé 2015; P1 Section 4 gives no formula)."""

from __future__ import annotations

import numpy as np

from app.learners import jit
from app.learners.base import Batch, Event, batch_size, check_range
from app.learners.bpa_kernel import bpa_pass
from app.learners.linear import BanditronExploration, LinearLearner, check_click


class BanditPA(BanditronExploration, LinearLearner):
    """Bandit Passive-Aggressive: plays like the Banditron, corrects only the played row.

    With ``a = click`` (1 when the played label ``yt`` was right), after Zhong & Daucé 2015:

        l = max(0, 1 + (1 - 2a) (w_yt . x)),
        w_yt <- w_yt + (2a - 1) (l / ||x||^2) x        (skipped when ||x|| = 0),

    a passive-aggressive step that moves the played row's score to +1 after a
    click and to -1 after a non-click.  This rule was recalled from
    third-party code, not checked against the original paper: compare with
    care.  State-dependent (SD): ``l`` uses the current ``w_yt``.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``K``.
    seed:
        Seed of the exploration draws.
    gamma:
        Exploration rate in ``(0, 1)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = BanditPA(n_features=3, n_classes=3, seed=1, gamma=0.2)
    >>> for _ in range(300):
    ...     y = int(rng.integers(3)); ctx = model.decide(np.eye(3)[y]).context
    ...     model.learn_one({**ctx, "click": float(ctx["played"] == y)})
    >>> [model.decide(np.eye(3)[c], explore=False).output["label"] for c in range(3)]
    [0, 1, 2]
    """

    paper = (
        "Zhong & Daucé 2015, *Online Multiclass Learning with \"Bandit\" Feedback under a "
        "Passive-Aggressive Approach*"
    )

    task = "label"
    feedback_fields = ("click",)

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, gamma: float = 0.05) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0, low_open=True, high_open=True)

    def learn_one(self, event: Event) -> None:
        sign = 2.0 * float(check_click(event["click"])) - 1.0
        x = np.asarray(event["x"], dtype=np.float64)
        norm2 = float(x @ x)
        if norm2 == 0.0:
            return
        row = self.W_[int(event["played"])]
        loss = max(0.0, 1.0 - sign * float(row @ x))
        row += (sign * loss / norm2) * x

    def learn_many(self, batch: Batch) -> None:
        """The events in order: one compiled pass (:mod:`app.learners.bpa_kernel`) over a
        batch of finite inputs and labels in range, else (or without the kernels)
        :meth:`learn_one` on each."""
        if not jit.enabled() or batch_size(batch) == 0:
            super().learn_many(batch)
            return
        X = np.asarray(batch["x"], dtype=np.float64)
        played = np.asarray(batch["played"])
        n = X.shape[0]
        if (X.shape != (n, self.n_features) or played.shape != (n,)
                or played.dtype.kind not in "iu" or played.min() < 0
                or played.max() >= self.n_classes or not np.isfinite(X).all()):
            super().learn_many(batch)  # the loop refuses (or wraps) as it always did
            return
        sign = 2.0 * np.asarray(check_click(batch["click"]), dtype=np.float64) - 1.0
        if sign.shape != (n,):
            super().learn_many(batch)
            return
        bpa_pass(np.ascontiguousarray(X), played.astype(np.intp), sign, self.W_)
