"""Shared machinery of the linear multiclass learners (Perceptron, Banditron family, MC-DBF).

All of them keep a weight matrix ``W_`` of shape ``(K, d)`` (row ``r`` scores
class ``r``) and, except SOBA, make *logged-only* (LO) updates
(P1 eq. (5), P2 Algorithm 2): an event adds ``x`` times a coefficient to a few rows,

    W[up]   += up_weight * x        (the played / true label or set)
    W[down] -= down_weight * x      (the greedy label or set)
    W       -= shift * x            (every row; MC-DBF's tau2 term)

where the coefficients depend only on logged quantities and the feedback.
A batch of ``B`` events is then the single matrix product ``W += C.T @ X``
with ``C`` the ``(B, K)`` matrix of per-event row coefficients.  A learner
only states its :class:`Terms`, computed by one expression that works on one
event (scalars) and on a columnar batch (arrays) alike, so the sequential
and batch paths cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    Batch,
    Decision,
    Event,
    Learner,
    ParamError,
    State,
    check_input,
    check_int,
    check_state,
)


class Terms(NamedTuple):
    """Row coefficients of LO updates, for one event (scalars / ``(m,)``) or a batch."""

    up: Any
    up_weight: Any
    down: Any
    down_weight: float = 1.0
    shift: float = 0.0


def lo_update_one(W: np.ndarray, x: np.ndarray, t: Terms) -> None:
    """Apply one event's LO update to ``W`` in place (rows in ``t.up`` are distinct).

    Fast path for the Banditron family (one played and one greedy row given
    as integers): each row is updated in place through a view, without the
    write-back of ``W[i] += ...``; the arithmetic, and so the result, is the
    same as the general path's.
    """
    up, down = t.up, t.down
    if isinstance(up, (int, np.integer)) and isinstance(down, (int, np.integer)):
        row = W[up]
        row += t.up_weight * x
        row = W[down]
        row -= x if t.down_weight == 1.0 else t.down_weight * x
    else:
        W[up] += t.up_weight * x
        W[down] -= t.down_weight * x
    if t.shift:
        W -= t.shift * x


def lo_coefficients(n_classes: int, t: Terms) -> np.ndarray:
    """The ``(B, K)`` coefficient matrix ``C`` of a batch, so that ``W += C.T @ X``.

    >>> lo_coefficients(3, Terms(np.array([0, 2]), np.array([2.0, 0.5]), np.array([0, 1])))
    array([[ 1. ,  0. ,  0. ],
           [ 0. , -1. ,  0.5]])
    """
    up = np.asarray(t.up).reshape(len(t.up), -1)
    down = np.asarray(t.down).reshape(len(t.down), -1)
    rows = np.arange(len(up))[:, None]
    C = np.full((len(up), n_classes), 0.0 - t.shift)
    C[rows, up] += np.asarray(t.up_weight, dtype=np.float64).reshape(-1, 1)
    C[rows, down] -= t.down_weight
    return C


def check_click(click: Any) -> Any:
    """Return ``click`` (scalar or array) if every value is exactly 0 or 1."""
    if isinstance(click, (float, int, np.number)):
        if click == 0 or click == 1:
            return click
    else:
        arr = np.asarray(click, dtype=np.float64)
        if np.all((arr == 0.0) | (arr == 1.0)):
            return arr
    raise ParamError("click", "feedback must be 0 or 1")


def check_label(label: Any, n_classes: int) -> Any:
    """Return ``label`` (scalar or array) if every value is an integer class index."""
    arr = np.asarray(label)
    integral = arr.dtype.kind in "iu" or (arr.dtype.kind == "f" and np.all(arr == np.round(arr)))
    if integral and arr.size and np.all((arr >= 0) & (arr < n_classes)):
        return arr.astype(np.int64) if arr.ndim else int(arr)
    raise ParamError("label", f"must be integers in [0, {n_classes - 1}]")


def own_input(x: np.ndarray, n_features: int) -> np.ndarray:
    """``x`` checked as a float64 vector that the caller does not share.

    Always a copy, so a logged context never aliases the caller's array.
    Fast path for the per-request call: one dot product tells that all
    entries are finite; only a failing input takes the full check (which
    raises :class:`ParamError` naming ``features``).  ``ndarray.dot`` rather
    than ``@`` here and in the decisions: the same BLAS call, without the
    ufunc dispatch that costs ``@`` about 0.5-0.9 us per call on small
    operands (measured with numpy 2.4).
    """
    arr = np.array(x, dtype=np.float64)
    if arr.shape == (n_features,) and math.isfinite(arr.dot(arr)):
        return arr
    if arr.shape != (n_features,) or not np.isfinite(arr).all():
        check_input(arr, n_features)  # raises
    return arr


def explore_draw(rng: np.random.Generator, greedy: int, gamma: float, n_classes: int
                 ) -> tuple[int, float]:
    """Draw from the Banditron exploration distribution (P1 eq. (3)).

    ``P(r) = (1 - gamma) I[r = greedy] + gamma / K``, sampled with one uniform
    ``u``: a uniform label ``floor(u K / gamma)`` when ``u < gamma``, else the
    greedy label.  Returns the played label and its probability ``P(played)``.
    MC-DBF's ordered draw uses the same rule per step, so with ``m = 1`` it
    plays exactly like Banditron.

    >>> explore_draw(np.random.default_rng(0), greedy=2, gamma=0.1, n_classes=4)
    (2, 0.925)
    """
    u = rng.random()
    played = min(int(u / gamma * n_classes), n_classes - 1) if u < gamma else greedy
    prob = gamma / n_classes + (1.0 - gamma) if played == greedy else gamma / n_classes
    return played, prob


def explore_decision(W: np.ndarray, x: np.ndarray, rng: np.random.Generator, gamma: float,
                     explore: bool) -> Decision:
    """The Banditron-family decision (Banditron, RCNBF, RCINE, SOBA; P1 eq. (3)).

    Greedy label ``argmax W x`` (ties to the lowest index) and, with
    ``explore``, a draw from :func:`explore_draw`; without exploration the
    greedy label is played with probability 1 and ``rng`` is not touched.
    Logs ``x``, ``greedy``, ``played`` and ``prob = P(played)``, the scalars
    as Python ``int`` / ``float`` (cheaper to build and to read back than
    numpy scalars; the store codec and :func:`~app.learners.base.stack_events`
    turn them into ``int64`` / ``float64`` arrays).
    """
    xv = own_input(x, W.shape[1])
    greedy = int(W.dot(xv).argmax())
    if explore:
        played, prob = explore_draw(rng, greedy, gamma, W.shape[0])
    else:
        played, prob = greedy, 1.0
    context: dict[str, Any] = {"x": xv, "greedy": greedy, "played": played, "prob": prob}
    output: dict[str, Any] = {"label": played, "probability": prob, "greedy_label": greedy}
    return Decision(output=output, context=context)


def explore_decisions(W: np.ndarray, X: np.ndarray, rng: np.random.Generator, gamma: float,
                      explore: bool) -> list[Decision]:
    """:func:`explore_decision` for each row of ``X``, with one matrix product.

    Same decisions and the same draws from ``rng``, in the same order, as
    the loop (one uniform per row when exploring).  The batch scores
    ``X W^T`` may differ from the loop's ``W x`` in the last bits (another
    summation order); both are within ``d eps ||x||_1 max|W|`` of the exact
    scores, so a row whose top two scores are closer than four times that is
    re-scored as the loop does.  A single row, inputs the loop would refuse
    (wrong shape, non-finite values), or whose scores overflow, take the loop
    itself.

    >>> W = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> rng = np.random.default_rng(0)
    >>> [d.output["label"] for d in explore_decisions(W, np.eye(2), rng, 0.1, explore=False)]
    [0, 1]
    """
    n_classes, n_features = W.shape
    Xv = np.array(X, dtype=np.float64)
    scores = Xv @ W.T if Xv.ndim == 2 and Xv.shape[1] == n_features and len(Xv) > 1 else None
    if scores is None or not np.isfinite(scores).all():  # (one row: the loop is cheaper)
        return [explore_decision(W, x, rng, gamma, explore) for x in Xv]
    greedy = scores.argmax(axis=1)
    top2 = np.sort(scores, axis=1)[:, -2:]
    tol = 4.0 * n_features * np.finfo(np.float64).eps * np.abs(W).max() * np.abs(Xv).sum(axis=1)
    for i in np.flatnonzero(top2[:, 1] - top2[:, 0] < tol):
        greedy[i] = (W @ Xv[i]).argmax()
    if explore:
        u = rng.random(len(Xv))
        # min(u, gamma): rows that play greedy never overflow the cast
        uniform = np.minimum((np.minimum(u, gamma) / gamma * n_classes).astype(np.int64),
                             n_classes - 1)
        played = np.where(u < gamma, uniform, greedy)
        prob = np.where(played == greedy, gamma / n_classes + (1.0 - gamma), gamma / n_classes)
    else:
        played, prob = greedy, np.ones(len(Xv))
    out = []
    for xv, g, p, q in zip(Xv, greedy.tolist(), played.tolist(), prob.tolist(), strict=True):
        context: dict[str, Any] = {"x": xv, "greedy": g, "played": p, "prob": q}
        out.append(Decision(output={"label": p, "probability": q, "greedy_label": g},
                            context=context))
    return out


class BanditronExploration:
    """Mixin: decisions drawn from the Banditron exploration law (P1 eq. (3)) with ``gamma``.

    Shared by the Banditron family, BPA and SOBA, which differ only in their
    updates: ``P(r) = (1 - gamma) I[r = y_hat] + gamma / K``.
    """

    W_: np.ndarray
    gamma: float
    _rng: np.random.Generator
    follows_baseline: ClassVar[bool] = True

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Greedy label and, with ``explore``, an exploration draw (see ``explore_decision``)."""
        return explore_decision(self.W_, x, self._rng, self.gamma, explore)

    def decide_many(self, X: np.ndarray, explore: bool = True) -> list[Decision]:
        """:meth:`decide` for each row of ``X`` with one matrix product (``explore_decisions``)."""
        return explore_decisions(self.W_, X, self._rng, self.gamma, explore)

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The distribution :meth:`decide` draws from for input ``x`` (as
        :func:`explore_draw`): ``1 - gamma + gamma / K`` on the greedy label, ``gamma / K``
        on each other."""
        n_classes = self.W_.shape[0]
        p = np.full(n_classes, self.gamma / n_classes)
        p[int(self.W_.dot(own_input(x, self.W_.shape[1])).argmax())] += 1.0 - self.gamma
        return p


class LinearLearner(Learner):
    """A ``(K, d)`` weight matrix ``W_`` with validated sizes and a seeded generator.

    Subclasses add ``decide`` and the update; ``get_state`` exports ``W_``
    plus whatever :meth:`_extra_state` returns.
    """

    W_: np.ndarray

    def __init__(self, *, n_features: int, n_classes: int | None, seed: int | None) -> None:
        self.n_features = check_int("n_features", n_features, 1)
        if n_classes is None:
            raise ParamError("n_classes", "is required")
        self.n_classes = check_int("n_classes", n_classes, 2)
        self.seed = None if seed is None else check_int("seed", seed, 0)
        self._rng = np.random.default_rng(seed)
        self.W_ = np.zeros((self.n_classes, self.n_features))

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``W_``: ``K d`` floats (subclasses with extra arrays add theirs)."""
        return ITEM_BYTES * (n_classes or 0) * n_features

    def _extra_state(self) -> State:
        return {}

    def _load_extra_state(self, state: State) -> None:
        """Install the validated extra arrays (``W_`` is already installed)."""

    def get_state(self) -> State:
        return {"W_": self.W_.copy(), **self._extra_state()}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        self._load_extra_state(checked)
        self.W_ = checked["W_"]


class LoggedOnlyLearner(LinearLearner):
    """Linear learner whose update is LO: ``learn_many`` is one matrix product.

    Subclasses implement :meth:`terms`, valid for one event and for a batch.
    """

    logged_only = True

    def terms(self, fields: Mapping[str, Any]) -> Terms:
        """The update's row coefficients for an event or a columnar batch."""
        raise NotImplementedError

    def learn_one(self, event: Event) -> None:
        lo_update_one(self.W_, event["x"], self.terms(event))

    def learn_many(self, batch: Batch) -> None:
        if not batch or len(batch["x"]) == 0:
            return
        C = lo_coefficients(self.n_classes, self.terms(batch))
        self.W_ += C.T @ np.asarray(batch["x"], dtype=np.float64)
