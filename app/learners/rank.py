"""Slate ranking from candidate features under position bias and click noise (``rank`` task).

A request carries a context ``x`` (``d_x`` features) and ``n`` candidate
actions, each with features ``a`` (``d_a``); the learner fills ``m`` slots.
Feedback is one click (or graded reward in ``[0, 1]``) per shown slot.

Model.  Each candidate is scored from the joint features

    phi(x, a) = [1, a, vec(x a^T)]          (D = 1 + d_a + d_x d_a entries)

so that an item never seen before is scored from its features at once (the
outer product plays the role of VW's ``-q`` interactions; Li et al. 2010,
LinUCB with hybrid/shared features).  The score is a ridge regression of the
true relevance ``gamma(x, a) = P(relevant | x, a)``:

    w = (lambda I + sum phi phi^T)^-1  sum_k (b_k - rho0 c_k) / (beta theta_k),
    b_k = sum over rows shown in slot k of phi * f,   c_k = sum of phi,   beta = 1 - rho0 - rho1.

Click model (position-based model, Richardson et al. 2007; Joachims et al.
2017, *Unbiased Learning-to-Rank with Biased Feedback*): the item in slot
``k`` is examined with probability ``theta_k`` (``theta_0 = 1``), a true click
is examination times relevance, and the observed click ``f`` is that click
flipped with the click-noise rates ``rho0``/``rho1`` of the ``label`` task,
so ``E[f] = rho0 + beta theta_k gamma``.  ``h(f) = (f - rho0) / beta``
(:func:`~app.learners.proxy.unbiased_click`) divided by ``theta_k`` is then
an unbiased target for ``gamma`` (inverse propensity weighting of Joachims et
al. 2017, with ``theta_k`` clipped below at ``theta_floor``).  The sums are
kept per slot and in raw clicks, so new noise rates or a new ``theta``
estimate apply to every event learned so far: the fit is always the ridge
solution for the current ``theta`` and rates, and batches add up
(``learn_many`` equals ``learn_one`` in a loop).  The inverse of
``lambda I + sum phi phi^T`` is kept up to date by the Woodbury identity
(``O(D^2 m)`` per event; Sherman-Morrison for one row) and recomputed from
the precision every :data:`REFRESH_EVENTS` events against rounding drift.

Position bias ``theta``.  Given a fixed ``position_bias`` it is used as is;
else it is estimated from the policy's own randomised placements by
comparing click rates *within score bands*: every shown row is binned by the
relevance score it was given when it was placed (logged with the decision,
``score_bands`` bins over ``[0, 1]``), and with ``n_kb`` rows and ``F_kb``
observed clicks in slot ``k`` and band ``b``,

    theta_k = sum_b (F_kb - rho0 n_kb) / sum_b n_kb (F_0b / n_0b - rho0)

over the bands with at least :data:`MIN_BAND_ROWS` rows in slot 0 (the
click rate of slot 0 in the same band, standardised to slot ``k``'s band
mix; ``beta`` cancels).  Items of equal score land in different slots
because the policy randomises (softmax and uniform draws), which is what
makes the ratio identifiable; this is the intervention-harvesting idea of
Agarwal et al. 2019 (*Estimating Position Bias without Intrusive
Interventions*) with the score band standing in for the query-document
pair, a simpler relative of regression-EM (Wang et al. 2018).  Until slot
``k`` has :data:`MIN_THETA_ROWS` rows in such bands ``theta_k = 1``.

Policy.  Slots are filled in order; slot ``k`` draws from the candidates not
yet placed with the Plackett-Luce (softmax) probabilities of the scores mixed
with a uniform share,

    p_k(a) = (1 - epsilon) softmax(s / temperature)_a + epsilon / |remaining|,

so the probability of each placement *given the slots before it* is exact
and logged (``probability``); their product over the slots is the
probability of the whole slate (the ``pscore`` of Open Bandit Pipeline's
cascade/independent layouts can be derived from these factors).
``temperature = 0`` is epsilon-greedy per slot (ties to the lowest index).
Thompson sampling on the ridge posterior was not used: it has no
closed-form slot propensity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    Batch,
    Decision,
    Event,
    Learner,
    ParamError,
    State,
    batch_size,
    check_input,
    check_int,
    check_non_negative,
    check_positive,
    check_range,
    check_state,
    size_param,
)
from app.learners.proxy import calibration_unreliable, check_noise_rates, clip_probability

#: Rows of slot 0 a score band needs before it enters the position-bias ratio.
MIN_BAND_ROWS = 10
#: Rows of slot ``k`` in usable bands before ``theta_k`` is estimated (1 until then).
MIN_THETA_ROWS = 200
#: Events between two recomputations of the inverse precision from the precision.
REFRESH_EVENTS = 4096
#: Largest number of candidates one decision accepts.
MAX_CANDIDATES = 10_000


def joint_features(x: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Rows ``phi(x, a) = [1, a, vec(x a^T)]`` for each row ``a`` of ``actions``.

    >>> joint_features(np.array([1.0, 2.0]), np.array([[3.0], [0.5]]))
    array([[1. , 3. , 3. , 6. ],
           [1. , 0.5, 0.5, 1. ]])
    """
    n = actions.shape[0]
    contexts = np.broadcast_to(x, (n, x.shape[-1]))
    outer = (contexts[:, :, None] * actions[:, None, :]).reshape(n, -1)
    return np.hstack([np.ones((n, 1)), actions, outer])


def slot_probabilities(scores: np.ndarray, temperature: float, epsilon: float) -> np.ndarray:
    """``(1 - epsilon) softmax(scores / temperature) + epsilon / n``; argmax for temperature 0.

    >>> slot_probabilities(np.array([0.0, 1.0]), 0.0, 0.2)
    array([0.1, 0.9])
    >>> slot_probabilities(np.array([0.0, np.log(3.0)]), 1.0, 0.0)
    array([0.25, 0.75])
    """
    n = scores.shape[0]
    if temperature == 0.0:
        p = np.zeros(n)
        p[int(scores.argmax())] = 1.0
    else:
        z = np.exp((scores - scores.max()) / temperature)
        p = z / z.sum()
    out: np.ndarray = (1.0 - epsilon) * p + epsilon / n
    return out


def position_bias_from_bands(counts: np.ndarray, clicks: np.ndarray,
                             rho0: float) -> tuple[np.ndarray, np.ndarray]:
    """``theta`` per slot from per-(slot, band) row counts and click sums (module docstring).

    Returns ``(theta, estimated)``: ``theta[0] = 1``; a slot without
    :data:`MIN_THETA_ROWS` rows in usable bands, or with a non-positive
    denominator, keeps 1 and ``estimated`` False.
    """
    m = counts.shape[0]
    theta, estimated = np.ones(m), np.zeros(m, dtype=bool)
    usable = counts[0] >= MIN_BAND_ROWS
    rate0 = np.divide(clicks[0], counts[0], out=np.zeros_like(clicks[0]), where=usable)
    for k in range(1, m):
        n_k = np.where(usable, counts[k], 0.0)
        denominator = float(n_k @ (rate0 - rho0))
        if n_k.sum() < MIN_THETA_ROWS or denominator <= 0.0:
            continue
        theta[k] = float(np.where(usable, clicks[k] - rho0 * counts[k], 0.0).sum()) / denominator
        estimated[k] = True
    return theta, estimated


class RidgeRanker(Learner):
    """Ridge regression on context x action features, Plackett-Luce slates (``ridge_pl``).

    Scores every candidate with a ridge regression of its relevance on the
    joint features ``[1, a, vec(x a^T)]``, learned from clicks corrected for
    click noise and divided by the (estimated or given) position bias of
    their slot, and fills the slots by softmax draws mixed with a uniform
    share, logging each placement's exact probability (module docstring).

    ``decide(x, actions=A)`` takes the context ``x`` (``n_features``) and the
    candidates' features ``A`` (``n x n_action_features``); ``learn_one``
    takes the logged context with ``clicks``: one value in ``[0, 1]`` per
    slot (a click or a graded reward; rows past the shown slots are ignored).

    Parameters
    ----------
    n_features:
        Context dimension ``d_x``.
    n_action_features:
        Action feature dimension ``d_a``; null: the same as ``n_features``.
    slots:
        Slots ``m`` a decision fills at most (fewer when there are fewer candidates
        or the request asks for fewer).
    seed:
        Seed of the slot draws.
    ridge:
        Ridge strength ``lambda`` added to the precision ``sum phi phi^T``.
    temperature:
        Softmax temperature on the relevance scale (scores are relevance
        probabilities); 0 plays the best remaining candidate (epsilon-greedy).
    epsilon:
        Share of each slot's probability spread uniformly over the remaining
        candidates, in ``[0, 1]``; keeps every placement's probability positive.
    position_bias:
        Fixed examination probabilities per slot relative to slot 0 (first 1,
        each in ``(0, 1]``, one per slot); null: estimated online from score bands.
    theta_floor:
        Smallest ``theta`` a click is divided by (clipping of the inverse
        propensity weight at ``1 / theta_floor``).
    score_bands:
        Bands of the score over ``[0, 1]`` within which click rates of the
        slots are compared to estimate the position bias.
    rho0, rho1:
        Click-noise rates ``P(click | not clicked truly)`` and
        ``P(no click | clicked truly)``; updated by :meth:`set_noise_rates`.

    Attributes
    ----------
    precision_:
        ``sum phi phi^T`` over the shown rows learned (ridge not included).
    inverse_:
        ``(ridge I + precision_)^-1`` as the Woodbury updates left it (kept in the
        state so that a restored model scores bit for bit as the original).
    clicks_by_slot_, rows_by_slot_:
        Per slot ``k``: ``sum phi f`` and ``sum phi`` over the rows shown there.
    band_rows_, band_clicks_:
        Rows and observed clicks per slot and score band (position-bias estimate).
    count_:
        Events learned.

    Examples
    --------
    Three candidates per request; the candidate whose single feature agrees
    with the context's sign is relevant:

    >>> rng = np.random.default_rng(0)
    >>> model = RidgeRanker(n_features=1, n_action_features=1, slots=1, seed=0)
    >>> hits = []
    >>> for t in range(2000):
    ...     x, A = rng.choice([-1.0, 1.0], size=1), rng.standard_normal((3, 1))
    ...     d = model.decide(x, actions=A)
    ...     top = d.output["ranking"][0]["index"]
    ...     click = float(x[0] * A[top, 0] == max(x[0] * A[:, 0]))
    ...     hits.append(click)
    ...     model.learn_one({**d.context, "clicks": np.array([click])})
    >>> float(np.mean(hits[-500:])) > 0.8
    True
    """

    task: ClassVar[str] = "rank"
    feedback_fields: ClassVar[tuple[str, ...]] = ("clicks",)
    logged_only: ClassVar[bool] = True
    uses_noise_rates: ClassVar[bool] = True
    ranks_candidates: ClassVar[bool] = True
    estimates_position_bias: ClassVar[bool] = True
    paper = (
        "Joachims, Swaminathan & Schnabel 2017, *Unbiased Learning-to-Rank with Biased "
        "Feedback* (inverse-propensity weighted clicks under the position-based model), with "
        "the position bias estimated from randomised placements within score bands (after "
        "Agarwal et al. 2019) and a ridge regression on context x action features "
        "(Li et al. 2010) (this project)"
    )

    def __init__(self, *, n_features: int, seed: int | None = None,
                 n_action_features: int | None = None, slots: int = 3, ridge: float = 1.0,
                 temperature: float = 0.03, epsilon: float = 0.03,
                 position_bias: tuple[float, ...] | None = None, theta_floor: float = 0.1,
                 score_bands: int = 20, rho0: float = 0.0, rho1: float = 0.0) -> None:
        self.n_features = check_int("n_features", n_features, 1, 1_000)
        self.n_action_features = check_int(
            "n_action_features", n_features if n_action_features is None else n_action_features,
            1, 1_000)
        self.slots = check_int("slots", slots, 1, 100)
        self.seed = seed
        self.ridge = check_positive("ridge", ridge)
        self.temperature = check_non_negative("temperature", temperature)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0)
        self.theta_floor = check_range("theta_floor", theta_floor, 0.0, 1.0, low_open=True)
        self.score_bands = check_int("score_bands", score_bands, 1, 1_000)
        self.position_bias = _check_position_bias(position_bias, self.slots)
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self._rng = np.random.default_rng(seed)
        dim = self.dimension
        self.precision_ = np.zeros((dim, dim))
        self.clicks_by_slot_ = np.zeros((self.slots, dim))
        self.rows_by_slot_ = np.zeros((self.slots, dim))
        self.band_rows_ = np.zeros((self.slots, self.score_bands))
        self.band_clicks_ = np.zeros((self.slots, self.score_bands))
        self.count_ = 0
        self.inverse_: np.ndarray = np.eye(dim) / self.ridge
        self._weights: np.ndarray | None = None

    @property
    def dimension(self) -> int:
        """``D = 1 + d_a + d_x d_a``, the length of the joint features."""
        return 1 + self.n_action_features * (1 + self.n_features)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``D^2`` precision and its inverse, ``2 m D`` per-slot sums, ``2 m B`` band sums
        and the count."""
        da = params.get("n_action_features")
        d_a = n_features if da is None else size_param(params, "n_action_features")
        m, bands = size_param(params, "slots"), size_param(params, "score_bands")
        dim = 1 + d_a * (1 + n_features)
        return ITEM_BYTES * (2 * dim * dim + 2 * m * dim + 2 * m * bands + 1)

    @classmethod
    def no_click_feedback(cls, params: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """No click in any slot."""
        return {"clicks": np.zeros(size_param(params, "slots"))}

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Use new click-noise rates; they apply to every event learned so far."""
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self._weights = None

    # -- position bias and scores -------------------------------------------------------

    def position_bias_estimate(self) -> tuple[np.ndarray, str]:
        """``theta`` per slot relative to slot 0 and its source.

        The source is ``"configured"`` (the ``position_bias`` parameter),
        ``"estimated"`` (every slot estimated from score bands) or
        ``"insufficient_data"`` (some slot still at the prior 1).
        """
        if self.position_bias is not None:
            return np.array(self.position_bias), "configured"
        theta, estimated = position_bias_from_bands(self.band_rows_, self.band_clicks_,
                                                     self.rho0)
        return theta, "estimated" if bool(estimated[1:].all()) else "insufficient_data"

    def weights(self) -> np.ndarray:
        """Ridge weights for the current noise rates and position bias (cached)."""
        if self._weights is None:
            theta, _ = self.position_bias_estimate()
            scale = 1.0 / ((1.0 - self.rho0 - self.rho1) * np.maximum(theta, self.theta_floor))
            target = scale @ (self.clicks_by_slot_ - self.rho0 * self.rows_by_slot_)
            self._weights = self.inverse_ @ target
        return self._weights

    def scores(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Predicted relevance ``w . phi(x, a)`` of each candidate row (not clipped).

        Computed as ``w_0 + A (w_a + W^T x)`` with ``W`` the ``d_x x d_a``
        block of ``w``, without building ``phi``: ``O(d_x d_a + n d_a)``.
        """
        w = self.weights()
        da = self.n_action_features
        per_action = w[1:1 + da] + x @ w[1 + da:].reshape(self.n_features, da)
        out: np.ndarray = w[0] + actions @ per_action
        return out

    # -- decisions -----------------------------------------------------------------------

    def _actions(self, actions: np.ndarray | None) -> np.ndarray:
        if actions is None:
            raise ParamError("actions", "the rank task needs candidate actions")
        arr = np.asarray(actions, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != self.n_action_features:
            raise ParamError("actions", f"expected shape (n, {self.n_action_features}), "
                             f"got {arr.shape}")
        if not 1 <= arr.shape[0] <= MAX_CANDIDATES:
            raise ParamError("actions", f"must hold 1 to {MAX_CANDIDATES} candidates, "
                             f"got {arr.shape[0]}")
        if not np.isfinite(arr.sum()):
            raise ParamError("actions", "contains non-finite values")
        return arr

    def decide(self, x: np.ndarray, explore: bool = True, *,
               actions: np.ndarray | None = None, slots: int | None = None) -> Decision:
        """Rank ``actions`` for context ``x`` into ``min(slots, n)`` slots.

        ``output["ranking"]`` lists per slot the candidate's row ``index``,
        the ``probability`` of that placement given the slots before it, and
        its calibrated ``expected_reward`` (predicted relevance clipped to
        ``[0, 1]``); ``greedy`` is the ranking by score.  Without
        ``explore`` the greedy ranking is played with probability 1.
        """
        x = check_input(x, self.n_features)
        A = self._actions(actions)
        m = self.slots if slots is None else check_int("slots", slots, 1, self.slots)
        shown = min(m, A.shape[0])
        s = self.scores(x, A)
        greedy = np.argsort(-s, kind="stable")[:shown]
        if explore:
            chosen, probs = self._draw(s, shown)
        else:
            chosen, probs = greedy, np.ones(shown)
        logged = np.zeros((self.slots, self.n_action_features))
        logged[:shown] = A[chosen]
        logged_scores = np.zeros(self.slots)
        logged_scores[:shown] = s[chosen]
        logged_probs = np.zeros(self.slots)
        logged_probs[:shown] = probs
        ranking = [{"index": int(i), "slot": k, "probability": float(p),
                    "expected_reward": clip_probability(float(s[i]))}
                   for k, (i, p) in enumerate(zip(chosen, probs, strict=True))]
        output = {"ranking": ranking, "greedy": [int(i) for i in greedy],
                  "calibration_unreliable": calibration_unreliable(self.rho0, self.rho1)}
        context: dict[str, Any] = {"x": x.copy(), "actions": logged,
                                   "shown": np.int64(shown), "scores": logged_scores,
                                   "probabilities": logged_probs}
        return Decision(output=output, context=context)

    def decide_many(self, X: np.ndarray, explore: bool = True, *,
                    actions: Sequence[np.ndarray] | None = None) -> list[Decision]:
        """:meth:`decide` for each row of ``X`` with its candidate matrix in ``actions``."""
        if actions is None or len(actions) != len(X):
            raise ParamError("actions", "one candidate matrix per context row is needed")
        return [self.decide(x, explore, actions=a) for x, a in zip(X, actions, strict=True)]

    def _draw(self, scores: np.ndarray, shown: int) -> tuple[np.ndarray, np.ndarray]:
        """Fill ``shown`` slots by sequential draws without replacement (module docstring)."""
        remaining = np.arange(scores.shape[0])
        chosen = np.empty(shown, dtype=np.intp)
        probs = np.empty(shown)
        for k in range(shown):
            p = slot_probabilities(scores[remaining], self.temperature, self.epsilon)
            pick = min(int(np.searchsorted(np.cumsum(p), self._rng.random(), side="right")),
                       remaining.shape[0] - 1)
            chosen[k], probs[k] = remaining[pick], p[pick]
            remaining = np.delete(remaining, pick)
        return chosen, probs

    # -- learning ------------------------------------------------------------------------

    def learn_one(self, event: Event) -> None:
        self.learn_many({k: np.asarray(v)[None] for k, v in event.items()})

    def learn_many(self, batch: Batch) -> None:
        """Add a batch's shown rows to the sums; the inverse follows by Woodbury."""
        if batch_size(batch) == 0:
            return
        n = batch_size(batch)
        contexts, A, slot, clicks, scores = self._check_batch(batch)
        phi = joint_features(contexts, A)
        self.precision_ += phi.T @ phi
        np.add.at(self.clicks_by_slot_, slot, phi * clicks[:, None])
        np.add.at(self.rows_by_slot_, slot, phi)
        band = np.clip((np.clip(scores, 0.0, 1.0) * self.score_bands).astype(np.intp),
                       0, self.score_bands - 1)
        np.add.at(self.band_rows_, (slot, band), 1.0)
        np.add.at(self.band_clicks_, (slot, band), clicks)
        before = self.count_
        self.count_ += n
        if (self.count_ // REFRESH_EVENTS != before // REFRESH_EVENTS
                or phi.shape[0] >= self.dimension):
            self._refresh_inverse()
        elif phi.shape[0]:
            # Woodbury: (P + U^T U)^-1 = P^-1 - P^-1 U^T (I + U P^-1 U^T)^-1 U P^-1
            left = self.inverse_ @ phi.T
            middle = np.eye(phi.shape[0]) + phi @ left
            self.inverse_ -= left @ np.linalg.solve(middle, left.T)
        self._weights = None

    def _refresh_inverse(self) -> None:
        self.inverse_ = np.linalg.inv(self.precision_ + self.ridge * np.eye(self.dimension))

    def _check_batch(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray, np.ndarray]:
        """Shown rows of a batch, validated: context, action features, slot, click and
        logged score of each."""
        X = np.asarray(batch["x"], dtype=np.float64)
        n = X.shape[0]
        if X.shape != (n, self.n_features) or not np.all(np.isfinite(X)):
            raise ParamError("features", f"expected finite shape (n, {self.n_features}), "
                             f"got {X.shape}")
        shape = (n, self.slots)
        actions = np.asarray(batch["actions"], dtype=np.float64)
        if actions.shape != (*shape, self.n_action_features) or not np.all(np.isfinite(actions)):
            raise ParamError("actions", f"expected finite logged shape "
                             f"{(*shape, self.n_action_features)}, got {actions.shape}")
        shown = np.asarray(batch["shown"])
        if shown.shape != (n,) or shown.dtype.kind not in "iu" or (
                n and (shown.min() < 0 or shown.max() > self.slots)):
            raise ParamError("shown", f"must be {n} counts in [0, {self.slots}]")
        mask = np.arange(self.slots)[None, :] < shown[:, None]
        clicks = np.asarray(batch["clicks"], dtype=np.float64)
        if clicks.shape != shape:
            raise ParamError("clicks", f"expected shape {shape}, got {clicks.shape}")
        shown_clicks = clicks[mask]
        if not np.all((shown_clicks >= 0.0) & (shown_clicks <= 1.0)):
            raise ParamError("clicks", "a shown slot's click must lie in [0, 1]")
        scores = np.asarray(batch["scores"], dtype=np.float64)
        if scores.shape != shape or not np.all(np.isfinite(scores[mask])):
            raise ParamError("scores", f"expected finite shape {shape}, got {scores.shape}")
        row, k = np.nonzero(mask)
        return X[row], actions[mask], k, shown_clicks, scores[mask]

    # -- state ---------------------------------------------------------------------------

    def get_state(self) -> State:
        return {
            "precision_": self.precision_.copy(),
            "inverse_": self.inverse_.copy(),
            "clicks_by_slot_": self.clicks_by_slot_.copy(),
            "rows_by_slot_": self.rows_by_slot_.copy(),
            "band_rows_": self.band_rows_.copy(),
            "band_clicks_": self.band_clicks_.copy(),
            "count_": np.array(self.count_, dtype=np.int64),
        }

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self.get_state(), state)
        if (checked["count_"] < 0 or np.any(checked["band_rows_"] < 0.0)
                or np.any(checked["band_clicks_"] < 0.0)):
            raise ParamError("state", "counts and click sums must be non-negative")
        self.precision_ = checked["precision_"]
        self.clicks_by_slot_ = checked["clicks_by_slot_"]
        self.rows_by_slot_ = checked["rows_by_slot_"]
        self.band_rows_ = checked["band_rows_"]
        self.band_clicks_ = checked["band_clicks_"]
        self.inverse_ = checked["inverse_"]
        self.count_ = int(checked["count_"])
        self._weights = None


def _check_position_bias(value: Sequence[float] | None, slots: int) -> tuple[float, ...] | None:
    """A fixed ``position_bias``: ``slots`` values in ``(0, 1]``, the first 1; or None."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ParamError("position_bias", f"must be a list of {slots} numbers or null")
    if len(value) != slots:
        raise ParamError("position_bias", f"must give one value per slot ({slots}), "
                         f"got {len(value)}")
    theta = tuple(check_range("position_bias", v, 0.0, 1.0, low_open=True) for v in value)
    if theta[0] != 1.0:
        raise ParamError("position_bias", f"is relative to slot 0, so the first value must "
                         f"be 1, got {theta[0]}")
    return theta
