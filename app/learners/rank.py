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
estimate apply to every event learned so far, and the sums add up (a batch
and the same events one by one give the same sums).

Lazy solve.  Learning an event only appends its shown rows (context, action
features, slot, click, logged score) to a buffer: ``O(m)`` copies, no
``D x D`` work per event.  A *refresh* folds the buffered rows into the sums
(one matrix product ``Phi^T Phi`` over them, which is where BLAS is
efficient), re-estimates ``theta`` and solves the ``D x D`` system for ``w``
afresh from the sums, so right after a refresh ``w`` is exactly the ridge
solution above for every event learned, the current rates and ``theta``.
Refreshes happen at the end of every ``learn_many`` (the trainer's batch,
so every published state is solved), on :meth:`RidgeRanker.get_state`,
:meth:`RidgeRanker.weights`, ``set_state`` and ``set_noise_rates``, and in
``learn_one`` whenever the count of
events is a multiple of :func:`refresh_step` (every event for the first 32,
then every ``count / 16`` rounded down to a power of two, at most
:data:`REFRESH_EVENTS`).  Between refreshes decisions score with the last
solution; the policy randomises every slot anyway, and a served model is
in the same position between two published versions.

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

    p_k(a) = (1 - epsilon - eta) softmax(s / temperature)_a + epsilon / |remaining|
             + eta 1[a has the lowest score left],

with ``eta = anchor_share`` (the least confident candidates in every slot,
the anchor of the per-slot click-noise estimate), so the probability of each
placement *given the slots before it* is exact
and logged (``probability``); their product over the slots is the
probability of the whole slate (the ``pscore`` of Open Bandit Pipeline's
cascade/independent layouts can be derived from these factors).
``temperature = 0`` is epsilon-greedy per slot (ties to the lowest index).
Thompson sampling on the ridge posterior was not used: it has no
closed-form slot propensity.

Features per slot.  A decision may give each candidate different features
in each slot (``actions`` of shape ``(m, n, d_a)``, e.g. the candidate's
features joined with the slot's) and restrict the candidates each slot may
take (``allowed``): slot ``k`` then scores with its own rows ``s_k`` and
draws as above among the candidates it allows and not yet placed, and logs
the features the placed candidate had in slot ``k``, so learning, the
position-bias bands and the per-slot noise estimate read the event as any
ranking.

Forgetting (``half_life``, :mod:`app.learners.forgetting`).  Every sum
above becomes a discounted sum: the rows of the event learned ``s`` events
ago weigh ``gamma^s``, so ``w`` is the discounted ridge solution of D-LinUCB
(Russac et al. 2019) with ``lambda`` kept constant, and the position-bias
bands follow the recent placements too.  A fold ages the sums by ``gamma``
to the power of the events since the last fold and weighs each buffered row
by its event's age; the sums in a state are aged to its ``count_`` (a state
is taken after a fold).  The policy has no confidence width, so ``V~`` plays
no part here.
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
from app.learners.forgetting import check_half_life, decay, discount
from app.learners.proxy import calibration_unreliable, check_noise_rates, clip_probability

#: Rows of slot 0 a score band needs before it enters the position-bias ratio.
MIN_BAND_ROWS = 10
#: Rows of slot ``k`` in usable bands before ``theta_k`` is estimated (1 until then).
MIN_THETA_ROWS = 200
#: Most events between two refreshes of the solution in ``learn_one``.
REFRESH_EVENTS = 256
#: ``learn_one`` refreshes at least every ``count / REFRESH_SHARE`` events.
REFRESH_SHARE = 16
#: Largest number of candidates one decision accepts.
MAX_CANDIDATES = 10_000


def joint_features(x: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Rows ``phi(x, a) = [1, a, vec(x a^T)]`` for each row ``a`` of ``actions``.

    ``x`` is one context or one per row of ``actions``.

    >>> joint_features(np.array([1.0, 2.0]), np.array([[3.0], [0.5]]))
    array([[1. , 3. , 3. , 6. ],
           [1. , 0.5, 0.5, 1. ]])
    """
    n = actions.shape[0]
    contexts = np.broadcast_to(x, (n, x.shape[-1]))
    outer = (contexts[:, :, None] * actions[:, None, :]).reshape(n, -1)
    return np.hstack([np.ones((n, 1)), actions, outer])


def refresh_step(count: int) -> int:
    """Events between refreshes of the solution in ``learn_one`` once ``count`` are learned.

    1 up to 31 events, then ``count // REFRESH_SHARE`` rounded down to a power
    of two, at most :data:`REFRESH_EVENTS`, so the solution never lags by more
    than about a sixteenth of the data.

    >>> [refresh_step(c) for c in (1, 31, 32, 100, 1_000, 100_000)]
    [1, 1, 2, 4, 32, 256]
    """
    return min(REFRESH_EVENTS, 1 << max(0, (count // REFRESH_SHARE).bit_length() - 1))


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


def score_share(values: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(values / temperature)``; at temperature 0 all on the best value (ties to the
    lowest index).

    >>> score_share(np.array([0.0, 1.0, 1.0]), 0.0).tolist()
    [0.0, 1.0, 0.0]
    """
    if temperature == 0.0:
        share: np.ndarray = (values == values.max()).astype(np.float64)
        share[share.argmax() + 1:] = 0.0  # ties to the lowest index
        return share
    share = np.exp((values - values.max()) / temperature)
    out: np.ndarray = share / share.sum()
    return out


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
    anchor_share:
        Share of each slot's probability given to the lowest-scored candidate
        left, in ``[0, 1 - epsilon]``: the surely irrelevant items the
        per-slot click-noise estimate (:mod:`app.learners.noise_slots`) needs
        in every slot.
    position_bias:
        Fixed examination probabilities per slot relative to slot 0 (first 1,
        each in ``(0, 1]``, one per slot); null: estimated online from score bands.
    theta_floor:
        Smallest ``theta`` a click is divided by (clipping of the inverse
        propensity weight at ``1 / theta_floor``).
    score_bands:
        Bands of the score over ``[0, 1]`` within which click rates of the
        slots are compared to estimate the position bias.
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more
        events (module docstring); null (the default) never forgets: 3,000
        cost a stationary stream 0.018 of the gap share (8 seeds), and the
        service recovers from a change by the drift detector's refit
        (``docs/results/drift.md``).
    rho0, rho1:
        Click-noise rates ``P(click | not clicked truly)`` and
        ``P(no click | clicked truly)``; updated by :meth:`set_noise_rates`.

    Attributes
    ----------
    precision_:
        ``sum phi phi^T`` over the shown rows folded in (ridge not included).
    clicks_by_slot_, rows_by_slot_:
        Per slot ``k``: ``sum phi f`` and ``sum phi`` over the rows shown there.
    band_rows_, band_clicks_:
        Rows and observed clicks per slot and score band (position-bias estimate).
    count_:
        Events learned (those still in the buffer included).

    The sums above hold the rows folded in at the last refresh; the rows
    learned since wait in a buffer (module docstring), and
    :meth:`get_state`, :meth:`weights` and :meth:`position_bias_estimate`
    fold them in first.

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
    follows_baseline: ClassVar[bool] = True
    explains_scores: ClassVar[bool] = True
    exploration_param: ClassVar[str | None] = "epsilon"
    estimates_position_bias: ClassVar[bool] = True
    logs_placements: ClassVar[bool] = True
    #: The service runs the per-slot click-noise estimate, whose bottom anchor needs the
    #: least confident items in every slot (``bench/bench_noise_slots.py`` measures the cost).
    service_defaults: ClassVar[Mapping[str, Any]] = {"anchor_share": 0.03}
    paper = (
        "Joachims, Swaminathan & Schnabel 2017, *Unbiased Learning-to-Rank with Biased "
        "Feedback* (inverse-propensity weighted clicks under the position-based model), with "
        "the position bias estimated from randomised placements within score bands (after "
        "Agarwal et al. 2019) and a ridge regression on context x action features "
        "(Li et al. 2010) (this project)"
    )

    def __init__(self, *, n_features: int, seed: int | None = None,
                 n_action_features: int | None = None, slots: int = 3, ridge: float = 1.0,
                 temperature: float = 0.03, epsilon: float = 0.03, anchor_share: float = 0.0,
                 position_bias: tuple[float, ...] | None = None, theta_floor: float = 0.1,
                 score_bands: int = 20, half_life: float | None = None,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        self.n_features = check_int("n_features", n_features, 1, 1_000)
        self.n_action_features = check_int(
            "n_action_features", n_features if n_action_features is None else n_action_features,
            1, 1_000)
        self.slots = check_int("slots", slots, 1, 100)
        self.seed = seed
        self.ridge = check_positive("ridge", ridge)
        self.temperature = check_non_negative("temperature", temperature)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0)
        self.anchor_share = check_range("anchor_share", anchor_share, 0.0, 1.0)
        if self.anchor_share + self.epsilon > 1.0:
            raise ParamError("anchor_share", f"anchor_share {anchor_share} and epsilon {epsilon} "
                             "share each slot's probability, so they may add up to 1 at most "
                             "(the service's anchor_share is 0.03 unless given): with epsilon "
                             "1, give anchor_share 0")
        self.theta_floor = check_range("theta_floor", theta_floor, 0.0, 1.0, low_open=True)
        self.score_bands = check_int("score_bands", score_bands, 1, 1_000)
        self.position_bias = _check_position_bias(position_bias, self.slots)
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self.half_life = check_half_life(half_life)
        self._gamma = discount(self.half_life)
        self._folded_at = 0  # count_ the sums are aged to (forgetting)
        self._rng = np.random.default_rng(seed)
        dim = self.dimension
        self.precision_ = np.zeros((dim, dim))
        self.clicks_by_slot_ = np.zeros((self.slots, dim))
        self.rows_by_slot_ = np.zeros((self.slots, dim))
        self.band_rows_ = np.zeros((self.slots, self.score_bands))
        self.band_clicks_ = np.zeros((self.slots, self.score_bands))
        self.count_ = 0
        self._slot_index = np.arange(self.slots)
        # shown rows learned since the last fold: (contexts, actions, slots, clicks, scores,
        # the count_ of each row's event)
        self._pending: list[tuple[np.ndarray, ...]] = []
        # the solution decisions score with: w, and its blocks w_0, w_a and W (d_x x d_a)
        self._weights = np.zeros(dim)
        self._blocks: tuple[float, np.ndarray, np.ndarray] = (
            0.0, np.zeros(self.n_action_features),
            np.zeros((self.n_features, self.n_action_features)))
        self._stale = False  # whether events or rates came in since the last solve
        # per-slot (alpha_k, beta_k) of the trust-bias click model, or None (set_slot_noise)
        self._affine: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def dimension(self) -> int:
        """``D = 1 + d_a + d_x d_a``, the length of the joint features."""
        return 1 + self.n_action_features * (1 + self.n_features)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``D^2`` precision, ``2 m D`` per-slot sums, ``2 m B`` band sums and the count."""
        da = params.get("n_action_features")
        d_a = n_features if da is None else size_param(params, "n_action_features")
        m, bands = size_param(params, "slots"), size_param(params, "score_bands")
        dim = 1 + d_a * (1 + n_features)
        return ITEM_BYTES * (dim * dim + 2 * m * dim + 2 * m * bands + 1)

    @classmethod
    def no_click_feedback(cls, params: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """No click in any slot."""
        return {"clicks": np.zeros(size_param(params, "slots"))}

    @classmethod
    def observed_clicks(cls, batch: Batch) -> np.ndarray:
        """The click in slot 0 of each event: slot 0 is always examined (``theta_0 = 1``),
        so its click rate corrected for click noise is the true relevance of the items
        ranked first, with no position-bias estimate in it."""
        clicks = np.asarray(batch.get("clicks", np.empty((0, 1))), dtype=np.float64)
        return clicks[:, 0]

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Use new click-noise rates; they apply to every event learned so far (the
        solution is refreshed at once)."""
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self._stale = True
        self._refresh()

    @classmethod
    def placement_rows(cls, batch: Batch
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(slot, probability, score, click)`` of every shown slot, event by event."""
        shown = np.asarray(batch["shown"]).reshape(-1)
        clicks = np.asarray(batch["clicks"], dtype=np.float64)
        mask = np.arange(clicks.shape[1]) < shown[:, None]
        return (np.nonzero(mask)[1], np.asarray(batch["probabilities"], dtype=np.float64)[mask],
                np.asarray(batch["scores"], dtype=np.float64)[mask], clicks[mask])

    def set_slot_noise(self, affine: tuple[Sequence[float], Sequence[float]] | None) -> None:
        """Learn from affine-corrected clicks ``(f - beta_k) / alpha_k`` (Vardasbi et al.
        CIKM 2020) in place of ``(f - rho0) / (beta theta_k)``; None: back to the rates and
        ``theta``.  Like the rates, it applies to every event learned so far."""
        new = None if affine is None else (np.array(affine[0], dtype=np.float64),
                                           np.array(affine[1], dtype=np.float64))
        if new is not None and not (new[0].shape == new[1].shape == (self.slots,)
                                    and np.all(new[0] > 0.0) and np.all(new[1] >= 0.0)):
            raise ParamError("slot_noise", f"needs {self.slots} alpha > 0 and beta >= 0")
        same = (new is None and self._affine is None) or (
            new is not None and self._affine is not None
            and all(np.array_equal(a, b) for a, b in zip(new, self._affine, strict=True)))
        if not same:
            self._affine = new
            self._stale = True
            self._refresh()

    # -- position bias and scores -------------------------------------------------------

    def position_bias_estimate(self) -> tuple[np.ndarray, str]:
        """``theta`` per slot relative to slot 0 and its source.

        The source is ``"configured"`` (the ``position_bias`` parameter),
        ``"estimated"`` (every slot estimated from score bands) or
        ``"insufficient_data"`` (some slot still at the prior 1).
        """
        if self.position_bias is not None:
            return np.array(self.position_bias), "configured"
        self._fold()
        theta, estimated = position_bias_from_bands(self.band_rows_, self.band_clicks_,
                                                     self.rho0)
        return theta, "estimated" if bool(estimated[1:].all()) else "insufficient_data"

    @classmethod
    def position_bias_prior(cls, params: Mapping[str, Any]) -> tuple[tuple[float, ...], str]:
        """The ``position_bias`` param (``configured``), else 1 per slot
        (``insufficient_data``): the score-band estimate is the learner's own fallback, not
        what a model shows.

        >>> RidgeRanker.position_bias_prior({"slots": 3, "position_bias": None})
        ((1.0, 1.0, 1.0), 'insufficient_data')
        """
        given = params.get("position_bias")
        if given is not None:
            return tuple(float(v) for v in given), "configured"
        return (1.0,) * size_param(params, "slots"), "insufficient_data"

    def weights(self) -> np.ndarray:
        """The ridge solution for every event learned, the current noise rates and
        position bias (refreshed first if anything changed; decisions use it from now on)."""
        self._refresh()
        return self._weights.copy()

    def _refresh(self) -> None:
        """Fold the buffered rows into the sums and solve for ``w`` (module docstring)."""
        if not self._stale:
            return
        self._fold()
        if self._affine is None:
            theta, _ = self.position_bias_estimate()
            alpha = (1.0 - self.rho0 - self.rho1) * np.maximum(theta, self.theta_floor)
            beta = np.full(self.slots, self.rho0)
        else:
            alpha, beta = np.maximum(self._affine[0], self.theta_floor), self._affine[1]
        target = (1.0 / alpha) @ (self.clicks_by_slot_ - beta[:, None] * self.rows_by_slot_)
        system = self.precision_.copy()
        system.flat[::self.dimension + 1] += self.ridge
        w = np.linalg.solve(system, target)
        da = self.n_action_features
        self._weights = w
        self._blocks = (float(w[0]), w[1:1 + da], w[1 + da:].reshape(self.n_features, da))
        self._stale = False

    def scores(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Predicted relevance ``w . phi(x, a)`` of each candidate row (not clipped), with
        the solution of the last refresh.

        Computed as ``w_0 + A (w_a + W^T x)`` with ``W`` the ``d_x x d_a``
        block of ``w``, without building ``phi``: ``O(d_x d_a + n d_a)``.
        """
        w0, wa, W = self._blocks
        out: np.ndarray = actions @ (wa + x @ W) + w0
        return out

    # -- decisions -----------------------------------------------------------------------

    def _actions(self, actions: np.ndarray | None) -> np.ndarray:
        """The candidates' features: ``(n, d_a)``, or ``(m, n, d_a)`` for features per slot."""
        if actions is None:
            raise ParamError("actions", "the rank task needs candidate actions")
        arr = np.asarray(actions, dtype=np.float64)
        if arr.ndim not in (2, 3) or arr.shape[-1] != self.n_action_features:
            raise ParamError("actions", f"expected shape (n, {self.n_action_features}) or "
                             f"(slots, n, {self.n_action_features}), got {arr.shape}")
        if not 1 <= arr.shape[-2] <= MAX_CANDIDATES:
            raise ParamError("actions", f"must hold 1 to {MAX_CANDIDATES} candidates, "
                             f"got {arr.shape[-2]}")
        if arr.ndim == 3 and not 1 <= arr.shape[0] <= self.slots:
            raise ParamError("actions", f"features for 1 to {self.slots} slots, "
                             f"got {arr.shape[0]}")
        if not np.isfinite(arr).all():
            raise ParamError("actions", "contains non-finite values")
        return arr

    def _allowed(self, allowed: np.ndarray | None, shown: int, n: int) -> np.ndarray | None:
        if allowed is None:
            return None
        mask = np.asarray(allowed)
        if mask.shape != (shown, n) or mask.dtype != np.bool_:
            raise ParamError("allowed", f"expected a boolean mask of shape {(shown, n)}, "
                             f"got {mask.shape}")
        return mask

    def decide(self, x: np.ndarray, explore: bool = True, *,
               actions: np.ndarray | None = None, slots: int | None = None,
               allowed: np.ndarray | None = None) -> Decision:
        """Rank ``actions`` for context ``x`` into ``min(slots, n)`` slots.

        ``actions`` is ``(n, d_a)``, the same features in every slot, or
        ``(m, n, d_a)``: candidate ``i``'s features when placed in slot ``k``
        (e.g. joined with the slot's own), which fill ``m`` slots, each scored
        with its own features; ``allowed`` (``(shown, n)`` booleans, None: all)
        restricts the candidates each slot may take (a slot without any left
        is a :class:`ParamError`).  ``output["ranking"]`` lists per slot the
        candidate's row ``index``, the ``probability`` of that placement given
        the slots before it, and its calibrated ``expected_reward`` (predicted
        relevance clipped to ``[0, 1]``); ``greedy`` is the ranking by score
        (slot by slot).  Without ``explore`` the greedy ranking is played with
        probability 1.
        """
        x = check_input(x, self.n_features)
        A = self._actions(actions)
        n = A.shape[-2]
        if A.ndim == 3:
            shown = A.shape[0]
            if slots is not None and slots != shown:
                raise ParamError("slots", f"features for {shown} slots fill {shown}, not {slots}")
        else:
            m = self.slots if slots is None else check_int("slots", slots, 1, self.slots)
            shown = min(m, n)
        mask = self._allowed(allowed, shown, n)
        s = self.scores(x, A)
        if s.ndim == 1 and mask is None:
            greedy = np.argsort(-s, kind="stable")[:shown].tolist()
        else:
            greedy = self._draw(s, shown, mask, explore=False)[0]
        if explore:
            chosen, probs = self._draw(s, shown, mask)
        else:
            chosen, probs = greedy, [1.0] * shown
        return self._placed(x, A, s, chosen, probs, greedy)

    def _placed(self, x: np.ndarray, A: np.ndarray, s: np.ndarray, chosen: Sequence[int],
                probs: Sequence[float], greedy: list[int]) -> Decision:
        """The decision placing rows ``chosen`` of ``A`` (scored ``s``) in the first slots,
        with their placement probabilities ``probs``."""
        shown = len(chosen)
        k = np.arange(shown)
        rows = A[chosen] if A.ndim == 2 else A[k, chosen]
        logged = np.zeros((self.slots, self.n_action_features))
        logged[:shown] = rows
        logged_scores = np.zeros(self.slots)
        logged_scores[:shown] = s[chosen] if s.ndim == 1 else s[k, chosen]
        logged_probs = np.zeros(self.slots)
        logged_probs[:shown] = probs
        ranking = [{"index": i, "slot": j, "probability": p, "expected_reward": clip_probability(v)}
                   for j, (i, p, v) in enumerate(zip(chosen, probs, logged_scores[:shown].tolist(),
                                                     strict=True))]
        output = {"ranking": ranking, "greedy": greedy,
                  "calibration_unreliable": calibration_unreliable(self.rho0, self.rho1,
                                                                   self.noise_rates_reliable)}
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

    def follow_ranking(self, x: np.ndarray, baseline: Sequence[int], *,
                       actions: np.ndarray | None = None, slots: int | None = None,
                       allowed: np.ndarray | None = None) -> Decision:
        """The greedy :meth:`decide` playing the caller's ranking ``baseline`` instead (rows of
        ``actions``, best first; its first ``min(slots, n)`` fill the slots, each allowed
        there), each placement with probability 1 (a deterministic choice of the caller's);
        ``greedy`` is kept."""
        decision = self.decide(x, False, actions=actions, slots=slots, allowed=allowed)
        shown = int(decision.context["shown"])
        rows = [int(i) for i in baseline[:shown]]
        A = self._actions(actions)
        n = A.shape[-2]
        if len(rows) < shown or len(set(rows)) < shown or not all(0 <= i < n for i in rows):
            raise ParamError("baseline", f"must rank at least {shown} distinct candidates")
        if allowed is not None and not all(allowed[k][i] for k, i in enumerate(rows)):
            raise ParamError("baseline", "places a candidate in a slot that does not allow it")
        if rows == list(decision.output["greedy"]):
            return decision
        placed = self._placed(decision.context["x"], A, self.scores(decision.context["x"], A),
                              rows, [1.0] * shown, decision.output["greedy"])
        return Decision({**decision.output, "ranking": placed.output["ranking"]},
                        placed.context)

    def feature_effects(self, x: np.ndarray, actions: np.ndarray
                        ) -> tuple[float, np.ndarray, np.ndarray]:
        """The score of each candidate row split by input feature, with the solution in use:
        ``w_0 + sum_j x_j C[i, j] + sum_k A[i, k] B[i, k]`` with ``C = A W^T`` (the
        interaction ``x^T W a`` counted with the context features) and ``B[i] = w_a``.
        Returns ``(w_0, C, B)``.

        >>> m = RidgeRanker(n_features=2, n_action_features=1, slots=1)
        >>> w0, C, B = m.feature_effects(np.ones(2), np.ones((3, 1)))
        >>> C.shape, B.shape
        ((3, 2), (3, 1))
        """
        x = check_input(x, self.n_features)
        A = self._actions(actions)
        w0, wa, W = self._blocks
        return w0, A @ W.T, np.tile(wa, (A.shape[0], 1))

    def first_slot_probabilities(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The probability of each candidate row to be placed in slot 0 by :meth:`decide`
        with ``explore`` (the mixture of the module docstring over all candidates)."""
        s = self.scores(check_input(x, self.n_features), self._actions(actions))
        low, eps = self.anchor_share, self.epsilon
        probs: np.ndarray = (1.0 - low - eps) * score_share(s, self.temperature) + eps / len(s)
        probs[int(s.argmin())] += low
        return probs

    def _draw(self, scores: np.ndarray, shown: int, allowed: np.ndarray | None = None, *,
              explore: bool = True) -> tuple[list[int], list[float]]:
        """Fill ``shown`` slots by sequential draws without replacement (module docstring).

        ``scores`` is one score per candidate, or one row per slot (``(shown, n)``);
        slot ``k`` draws among the candidates not placed yet (and ``allowed[k]``).
        One uniform ``u`` per slot: below ``anchor_share`` it picks the lowest
        score left, then for an ``epsilon`` share it picks uniformly (``u``
        rescaled to the candidates left), else by the softmax (or the best score
        at temperature 0), so each placement has exactly the logged mixture
        probability.  Without ``explore`` each slot takes its best score left
        (ties to the lowest index), with probability 1.
        """
        low, eps, temperature = self.anchor_share, self.epsilon, self.temperature
        rest = 1.0 - low - eps
        uniforms = self._rng.random(shown).tolist() if explore else [None] * shown
        free = np.ones(scores.shape[-1], dtype=bool)
        chosen: list[int] = []
        probs: list[float] = []
        for k, u in enumerate(uniforms):
            left = np.flatnonzero(free if allowed is None else free & allowed[k])
            if left.size == 0:
                raise ParamError("allowed", f"slot {k} has no candidate left: the slots "
                                 "before it took every one it allows")
            values = (scores if scores.ndim == 1 else scores[k])[left]
            n = left.shape[0]
            if u is None:
                pick, p = int(values.argmax()), 1.0
            else:
                worst = int(values.argmin())
                share = score_share(values, temperature)
                if u < low:
                    pick = worst
                elif u < low + eps:
                    pick = min(int((u - low) / eps * n), n - 1)
                else:
                    pick = min(int(share.cumsum().searchsorted((u - low - eps) / rest, "right")),
                               n - 1)
                p = low * (pick == worst) + eps / n + rest * float(share[pick])
            chosen.append(int(left[pick]))
            probs.append(p)
            free[left[pick]] = False
        return chosen, probs

    # -- learning ------------------------------------------------------------------------

    def learn_one(self, event: Event) -> None:
        """Buffer the event's shown rows; refresh when the count is a multiple of
        :func:`refresh_step`."""
        self._add(self._check_batch({k: np.asarray(v)[None] for k, v in event.items()}), 1)
        if self.count_ % refresh_step(self.count_) == 0:
            self._refresh()

    def learn_many(self, batch: Batch) -> None:
        """Buffer the batch's shown rows and refresh (the solution is exact afterwards)."""
        n = batch_size(batch)
        if n == 0:
            return
        self._add(self._check_batch(batch), n)
        self._refresh()

    def _add(self, rows: tuple[np.ndarray, ...], events: int) -> None:
        *shown, event = rows
        self._pending.append((*shown, self.count_ + 1 + event))
        self.count_ += events
        self._stale = True

    def _fold(self) -> None:
        """Add the buffered rows to the sums (module docstring)."""
        if not self._pending:
            return
        contexts, A, slot, clicks, scores, at = (np.concatenate(part)
                                                 for part in zip(*self._pending, strict=True))
        self._pending = []
        phi = joint_features(contexts, A)
        in_slot = (slot == self._slot_index[:, None]).astype(np.float64)
        weight: np.ndarray | float = 1.0
        weighted = phi
        if self.half_life is not None:
            old = float(decay(self._gamma, np.array(self.count_ - self._folded_at)))
            for name, value in self._statistics().items():
                if name != "count_":
                    value *= old
            weight = decay(self._gamma, self.count_ - at)
            weighted = phi * weight[:, None]
            in_slot *= weight
        self._folded_at = self.count_
        self.precision_ += weighted.T @ phi
        self.clicks_by_slot_ += (in_slot * clicks) @ phi
        self.rows_by_slot_ += in_slot @ phi
        band = np.clip((np.clip(scores, 0.0, 1.0) * self.score_bands).astype(np.intp),
                       0, self.score_bands - 1)
        np.add.at(self.band_rows_, (slot, band), weight)
        np.add.at(self.band_clicks_, (slot, band), clicks * weight)

    def _check_batch(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray, np.ndarray, np.ndarray]:
        """Shown rows of a batch, validated: context, action features, slot, click,
        logged score and event (row of the batch) of each."""
        X = np.asarray(batch["x"], dtype=np.float64)
        n = X.shape[0]
        if X.shape != (n, self.n_features) or not np.isfinite(X).all():
            raise ParamError("features", f"expected finite shape (n, {self.n_features}), "
                             f"got {X.shape}")
        shape = (n, self.slots)
        actions = np.asarray(batch["actions"], dtype=np.float64)
        if actions.shape != (*shape, self.n_action_features) or not np.isfinite(actions).all():
            raise ParamError("actions", f"expected finite logged shape "
                             f"{(*shape, self.n_action_features)}, got {actions.shape}")
        shown = np.asarray(batch["shown"])
        if shown.shape != (n,) or shown.dtype.kind not in "iu" or (
                n and (shown.min() < 0 or shown.max() > self.slots)):
            raise ParamError("shown", f"must be {n} counts in [0, {self.slots}]")
        mask = self._slot_index < shown[:, None]
        clicks = np.asarray(batch["clicks"], dtype=np.float64)
        if clicks.shape != shape:
            raise ParamError("clicks", f"expected shape {shape}, got {clicks.shape}")
        shown_clicks = clicks[mask]
        if not ((shown_clicks >= 0.0) & (shown_clicks <= 1.0)).all():
            raise ParamError("clicks", "a shown slot's click must lie in [0, 1]")
        scores = np.asarray(batch["scores"], dtype=np.float64)
        shown_scores = scores[mask] if scores.shape == shape else None
        if shown_scores is None or not np.isfinite(shown_scores).all():
            raise ParamError("scores", f"expected finite shape {shape}, got {scores.shape}")
        row, k = mask.nonzero()
        return X[row], actions[mask], k, shown_clicks, shown_scores, row

    # -- state ---------------------------------------------------------------------------

    def get_state(self) -> State:
        """The sums and the count, after a refresh (so that a model restored from them
        scores as this one does from now on)."""
        self._refresh()
        return {name: value.copy() for name, value in self._statistics().items()}

    def _statistics(self) -> State:
        return {
            "precision_": self.precision_,
            "clicks_by_slot_": self.clicks_by_slot_,
            "rows_by_slot_": self.rows_by_slot_,
            "band_rows_": self.band_rows_,
            "band_clicks_": self.band_clicks_,
            "count_": np.array(self.count_, dtype=np.int64),
        }

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        checked = check_state(self._statistics(), state)
        if (checked["count_"] < 0 or np.any(checked["band_rows_"] < 0.0)
                or np.any(checked["band_clicks_"] < 0.0)):
            raise ParamError("state", "counts and click sums must be non-negative")
        self.precision_ = checked["precision_"]
        self.clicks_by_slot_ = checked["clicks_by_slot_"]
        self.rows_by_slot_ = checked["rows_by_slot_"]
        self.band_rows_ = checked["band_rows_"]
        self.band_clicks_ = checked["band_clicks_"]
        self.count_ = int(checked["count_"])
        self._folded_at = self.count_
        self._pending = []
        self._stale = True
        self._refresh()


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
