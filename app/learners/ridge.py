"""Per-arm ridge-regression bandits for the ``label`` task (not in the papers).

Each label (arm) ``a`` has a linear model of the *observed* click rate,
``mu_a(x) = theta_a . x``, fitted by ridge regression on the events where
``a`` was played.  Two policies sit on top of it:

* :class:`LinUCBDiag` plays ``argmax_a mu_a(x) + alpha * w_a(x)``, where
  ``w_a(x)`` is the model's uncertainty width (LinUCB, Li et al. 2010, with a
  diagonal precision);
* :class:`SquareCBDiag` draws from the inverse-gap-weighted distribution of
  SquareCB (Foster & Rakhlin 2020), a stochastic policy whose propensities are
  logged for off-policy evaluation.

:class:`~app.learners.lints.LinTSDiag` (``lints_diag``) samples from it
(Thompson sampling); :class:`~app.learners.linucb.LinUCB` (``linucb``) keeps
a full ``d x d`` precision per arm for small ``d``.

Noise handling.  Under class-independent click noise (P1 Section 3) the observed
click has expectation ``rho0 + (1 - rho0 - rho1) * p`` where ``p`` is the true
click probability: an increasing affine map of ``p``.  The greedy label and
the exploration rule therefore do not change when the models learn the raw
clicks, and the exploration parameters (``alpha``, ``gamma_scale``) stay on
the scale of the clicks they were tuned on.  The noise rates serve only to
report a calibrated reward ``(mu - rho0) / (1 - rho0 - rho1)`` (P1 Lemma 1, the
same map as the proxy ``h``) clipped to ``[0, 1]``, as ``expected_reward`` in the
decision (``mu`` of the diagonal learners corrected by the arm's recent mean residual,
:class:`DiagRidge`), with ``calibration_unreliable`` true when ``1 - rho0 - rho1`` is below
:data:`~app.learners.proxy.CALIBRATION_BETA_MIN` or the rates are initial ones awaiting
an estimate (:meth:`~app.learners.base.Learner.set_noise_reliability`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from app.learners import jit
from app.learners.base import (
    ITEM_BYTES,
    Batch,
    Decision,
    Event,
    Learner,
    ParamError,
    State,
    batch_size,
    check_int,
    check_non_negative,
    check_positive,
    check_range,
    check_state,
    stack_events,
)
from app.learners.forgetting import check_half_life, decay, discount, effective_count
from app.learners.proxy import calibrated_probability, calibration_unreliable, check_noise_rates
from app.learners.ridge_kernel import diag_ridge_pass

#: Half-life (events) of the residuals that calibrate a diagonal learner's
#: ``expected_reward``, or the learner's own ``half_life`` when shorter.
CALIBRATION_HALF_LIFE = 10_000.0

#: Smallest ridge strength: the smallest normal double, so that ``1 / lambda`` stays finite
#: when ``ridge * mean ||x||^2`` underflows (inputs of norm 1e-160 or a subnormal ``ridge``).
MIN_LAMBDA = float(np.finfo(np.float64).tiny)


def ucb_labels(mean: np.ndarray, width: np.ndarray, alpha: float) -> tuple[int, int]:
    """Greedy label ``argmax mean`` and optimistic label ``argmax mean + alpha * width``.

    Ties go to the lowest index.

    >>> ucb_labels(np.array([0.5, 0.4]), np.array([0.0, 0.2]), alpha=1.0)
    (0, 1)
    """
    return int(mean.argmax()), int((mean + alpha * width).argmax())


def igw_probabilities(mean: np.ndarray, gamma: float) -> np.ndarray:
    """Inverse-gap weighting of SquareCB (Foster & Rakhlin 2020, Algorithm 1).

    With ``b = argmax mean`` (lowest index on ties),
    ``p_a = 1 / (K + gamma * (mean_b - mean_a))`` for ``a != b`` and
    ``p_b = 1 - sum_{a != b} p_a``.  Every ``p_a`` is positive and
    ``p_b >= 1/K``; ``gamma = 0`` gives the uniform distribution.

    >>> igw_probabilities(np.array([1.0, 0.0, 0.5]), gamma=2.0).round(4)
    array([0.55, 0.2 , 0.25])
    """
    k = mean.shape[0]
    best = int(mean.argmax())
    p: np.ndarray = 1.0 / (k + gamma * (mean[best] - mean))
    p[best] = 0.0
    p[best] = 1.0 - p.sum()
    return p


def check_uniform_share(value: float) -> float:
    """``uniform_share`` as a float in ``[0, 1)``, else :class:`ParamError`."""
    return check_range("uniform_share", value, 0.0, 1.0, high_open=True)


def with_uniform_share(p: np.ndarray, uniform_share: float) -> np.ndarray:
    """The policy ``p`` mixed with the uniform one: ``(1 - uniform_share) p + uniform_share / K``
    (``p``: one distribution, or one per row).

    Every label then has probability at least ``uniform_share / K``, the known positive
    propensity the uniform anchor of :mod:`app.learners.noise_anchor` needs.

    >>> with_uniform_share(np.array([1.0, 0.0, 0.0, 0.0]), 0.2)
    array([0.85, 0.05, 0.05, 0.05])
    """
    mixed: np.ndarray = (1.0 - uniform_share) * p + uniform_share / p.shape[-1]
    return mixed


class RidgeBandit(Learner):
    """Shared parts of the ridge bandits: noise rates, event checks, decisions.

    Subclasses provide ``_estimate(x) -> (mean, width)`` (per-arm predicted
    observed click rate and uncertainty width) and the update.
    """

    task: ClassVar[str] = "label"
    feedback_fields: ClassVar[tuple[str, ...]] = ("click",)
    logged_only: ClassVar[bool] = True
    uses_noise_rates: ClassVar[bool] = True
    keeps_noise_samples: ClassVar[bool] = True
    follows_baseline: ClassVar[bool] = True

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None,
                 rho0: float, rho1: float) -> None:
        self.n_features = check_int("n_features", n_features, 1, 1_000_000)
        self.n_classes = check_int("n_classes", n_classes, 2, 10_000)
        self.seed = seed
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)
        self._rng = np.random.default_rng(seed)

    def set_noise_rates(self, rho0: float, rho1: float) -> None:
        """Use new click-noise rates (e.g. an NREst estimate) for ``expected_reward``.

        Learning and exploration do not depend on them (module docstring).
        """
        self.rho0, self.rho1 = check_noise_rates(rho0, rho1)

    def calibrate(self, mean: float) -> float:
        """Map a predicted observed click rate to a true one: ``(mu - rho0) / (1 - rho0 - rho1)``.

        This is the proxy ``h`` of P1 Lemma 1 applied to the predicted rate
        (``h`` inverts the noise map of P1 Section 3), clipped to ``[0, 1]``: the
        linear model's ``mu`` is not confined to ``[0, 1]``, and ``h``
        magnifies its errors by ``1 / (1 - rho0 - rho1)``.
        """
        return calibrated_probability(mean, self.rho0, self.rho1)

    def reward_offset(self, arm: int) -> float:
        """What to add to ``arm``'s predicted observed click rate before :meth:`calibrate`
        (0: the prediction is reported as is; :class:`DiagRidge` corrects it)."""
        return 0.0

    def _estimate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-arm predicted observed click rate and uncertainty width for ``x``."""
        raise NotImplementedError

    def _input(self, x: np.ndarray, copy: bool = False) -> np.ndarray:
        """``x`` as a float64 vector of length ``n_features``, else :class:`ParamError`.

        A cheaper :func:`~app.learners.base.check_input` for the per-event
        path: one sum tells whether every entry is finite (a NaN or an
        infinity makes it non-finite; so does an overflowing sum, which the
        squared norms would overflow anyway).  ``copy=True`` returns a private
        copy (for the logged context).
        """
        arr = np.array(x, dtype=np.float64, copy=copy or None)
        if arr.shape != (self.n_features,):
            raise ParamError("features", f"expected shape ({self.n_features},), got {arr.shape}")
        if not np.isfinite(arr.sum()):
            raise ParamError("features", "contains non-finite values")
        return arr

    def _decide_ucb(self, x: np.ndarray, explore: bool, alpha: float,
                    uniform_share: float) -> Decision:
        """LinUCB decision: play ``argmax mean + alpha * width`` (greedy without ``explore``).

        With ``uniform_share > 0`` the label is drawn from
        ``(1 - uniform_share) e_optimistic + uniform_share / K`` and that
        probability is logged, so that every label has a known positive
        propensity (what the uniform anchor of
        :mod:`app.learners.noise_anchor` needs).
        """
        x = self._input(x, copy=True)
        mean, width = self._estimate(x)
        greedy, optimistic = ucb_labels(mean, width, alpha)
        if not explore:
            return self._decision(x, mean, greedy, greedy, 1.0)
        if uniform_share == 0.0:
            return self._decision(x, mean, greedy, optimistic, 1.0)
        p = np.zeros(self.n_classes)
        p[optimistic] = 1.0
        return self._draw(x, mean, greedy, with_uniform_share(p, uniform_share))

    def _draw(self, x: np.ndarray, mean: np.ndarray, greedy: int, p: np.ndarray) -> Decision:
        """Decision playing a label drawn from ``p``, logging ``p[played]`` as ``prob``."""
        # P(cdf[a-1] <= u < cdf[a]) = p[a]; the clamp absorbs rounding in cdf[-1].
        cdf = np.cumsum(p)
        played = min(int(np.searchsorted(cdf, self._rng.random(), side="right")),
                     self.n_classes - 1)
        return self._decision(x, mean, greedy, played, float(p[played]))

    def _decision(self, x: np.ndarray, mean: np.ndarray, greedy: int, played: int,
                  prob: float) -> Decision:
        output = {
            "label": played,
            "probability": prob,
            "greedy_label": greedy,
            "expected_reward": self.calibrate(float(mean[played]) + self.reward_offset(played)),
            "calibration_unreliable": calibration_unreliable(self.rho0, self.rho1,
                                                             self.noise_rates_reliable),
        }
        context: dict[str, Any] = {
            "x": x,
            "greedy": np.int64(greedy),
            "played": np.int64(played),
            "prob": np.float64(prob),
        }
        return Decision(output=output, context=context)

    def _check_event(self, event: Event) -> tuple[np.ndarray, int, float]:
        """``(x, played, click)`` of one joined event, validated."""
        x = self._input(event["x"])
        played = int(event["played"])
        if not 0 <= played < self.n_classes:
            raise ParamError("played", f"must be a label in [0, {self.n_classes}), got {played}")
        click = float(event["click"])
        if not 0.0 <= click <= 1.0:
            raise ParamError("click", f"must lie in [0, 1], got {click!r}")
        return x, played, click

    def _check_batch(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X, played, click)`` of a columnar batch, validated like :meth:`_check_event`.

        An empty batch (no fields, as :func:`~app.learners.base.stack_events`
        returns for no events) gives empty arrays.
        """
        if batch_size(batch) == 0:
            return np.zeros((0, self.n_features)), np.zeros(0, dtype=np.intp), np.zeros(0)
        X = np.asarray(batch["x"], dtype=np.float64)
        played = np.asarray(batch["played"])
        click = np.asarray(batch["click"], dtype=np.float64)
        n = X.shape[0]
        if X.shape != (n, self.n_features) or not np.all(np.isfinite(X)):
            raise ParamError("features", f"expected finite shape (n, {self.n_features}), "
                             f"got {X.shape}")
        if played.shape != (n,) or played.dtype.kind not in "iu" or (
                n and (played.min() < 0 or played.max() >= self.n_classes)):
            raise ParamError("played", f"must be {n} labels in [0, {self.n_classes})")
        if click.shape != (n,) or not np.all((click >= 0.0) & (click <= 1.0)):
            raise ParamError("click", f"must be {n} values in [0, 1]")
        return X, played.astype(np.intp), click


class DiagRidge(RidgeBandit):
    """Per-arm recursive ridge regression with a diagonal precision: O(K d) memory and time.

    Arm ``a`` keeps a weight row ``weights_[a]`` and the diagonal of its data
    precision, ``sum_x2_[a, j]`` = sum of ``x_j^2`` over the events where
    ``a`` was played; the ridge term is added when the precision is used:

        lambda_t = ridge * (sum of ||x||^2 over learned events) / t   (ridge before any)
        P_a      = 1 / (lambda_t + sum_x2_[a])                         (elementwise)
        mean_a(x)  = weights_[a] . x
        width_a(x) = sqrt( sum_j P_a,j x_j^2 )

    and an event ``(x, a, click)`` applies the recursive-least-squares step
    with ``P_a`` in place of the full inverse precision,

        weights_[a] += P_a * x * (click - weights_[a] . x) / (1 + x . (P_a * x))
        sum_x2_[a]  += x * x .

    Scaling ``lambda`` with the running mean squared norm makes the model
    invariant to a rescaling of the features: a fixed ``lambda = 1`` is far
    too weak for binary features with hundreds of ones.

    The step uses the residual of the current weights, so the update is
    state-dependent ("SD"): unlike the precision, the weights are
    *not* a sum of per-event terms.  (The purely additive estimator
    ``theta_a,j = sum(click x_j) / (lambda + sum x_j^2)`` fits each coordinate
    separately and ends near chance on digits: see ``docs/results/ridge.md``.)
    ``learn_many`` still equals learning the events one by one: it runs
    those steps in one compiled loop (:mod:`app.learners.ridge_kernel`), or
    without numba (:mod:`app.learners.jit`) in numpy: events of
    different arms touch different rows and interact only through
    ``lambda_t``, a prefix sum, so the batch is applied in ``max_a n_a``
    vectorised steps, step ``i`` updating every arm with its ``i``-th event.

    Forgetting (``half_life`` in events, :mod:`app.learners.forgetting`).
    With ``gamma = 2^(-1/half_life)`` every event ages every arm's precision
    by ``gamma``, and a second precision ``sum_x2_sq_`` is aged by
    ``gamma^2`` (D-LinUCB's ``V~``, Russac et al. 2019); with
    ``V_a = lambda_t + sum_x2_[a]`` and ``V~_a = lambda_t + sum_x2_sq_[a]``
    (elementwise, aged to now)

        width_a(x) = sqrt( sum_j x_j^2 V~_a,j / V_a,j^2 )

    the diagonal form of ``sqrt(x^T V^-1 V~ V^-1 x)``.  The weights follow
    the exponentially weighted recursive-least-squares step (the gain uses
    the aged precision; the weights themselves are not shrunk, so an arm
    left unplayed keeps its mean while its width grows back).  An arm is aged
    when it is next touched, by ``gamma`` to the power of the events since
    ``aged_at_[a]``, so a batch and the events one by one apply the same
    factors.  ``lambda_t`` keeps the mean ``||x||^2`` over all events (a
    scale, not evidence).

    Calibration of ``expected_reward``.  A linear model of the clicks without
    intercept, its weights moved by steps that shrink as ``1 / n`` without
    forgetting, predicts the clicks of the arms it plays too low (0.14 on the
    ``h`` scale on a 10-arm argmax stream; ``tests/truth``).  Each arm keeps
    the residuals ``click - weights_[a] . x`` of its events *before* learning
    them (what its predictions missed, the way a decision's prediction is
    checked against its click): their sum, sum of squares and weight
    ``resid_sum_[a]``, ``resid_sq_[a]``, ``resid_weight_[a]``, aged by
    ``2^(-1/h)`` per event with ``h`` the smaller of ``half_life`` and
    :data:`CALIBRATION_HALF_LIFE` (``resid_at_``: the count they were aged
    to).  With their mean ``m`` and its variance ``v`` (the residuals'
    variance over the weight), ``expected_reward`` is ``h`` of
    ``mean_a(x) + m max(0, 1 - v / m^2)``: the mean shrunk towards 0 by its
    own noise (positive-part James-Stein), so a model whose predictions are
    right is left alone but for noise.  The policy still plays by the
    uncorrected means.  The residuals are those
    the sequential steps compute, so a batch gives the same sums.
    """

    logged_only: ClassVar[bool] = False

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None,
                 rho0: float, rho1: float, ridge: float, half_life: float | None) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1)
        self.ridge = check_positive("ridge", ridge)
        self.half_life = check_half_life(half_life)
        self._gamma = discount(self.half_life)
        shape = (self.n_classes, self.n_features)
        self.weights_ = np.zeros(shape)
        self.sum_x2_ = np.zeros(shape)
        self.sum_norm2_ = 0.0  # Python scalars: cheaper per event; arrays in get_state
        self.count_ = 0
        # with forgetting: the gamma^2-aged precision and the count each arm was aged to
        self.sum_x2_sq_ = np.zeros(shape if self.half_life is not None else (0, 0))
        self.aged_at_ = np.zeros(self.n_classes if self.half_life is not None else 0,
                                 dtype=np.int64)
        self._calibration_gamma = discount(min(self.half_life or CALIBRATION_HALF_LIFE,
                                               CALIBRATION_HALF_LIFE))
        self.resid_sum_ = np.zeros(self.n_classes)
        self.resid_sq_ = np.zeros(self.n_classes)
        self.resid_weight_ = np.zeros(self.n_classes)
        self.resid_at_ = np.zeros(self.n_classes, dtype=np.int64)
        # width weights (class docstring), held while decide_many decides (None: per call)
        self._held_precisions: np.ndarray | None = None

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``weights_`` and ``sum_x2_`` (``K d`` floats each), ``sum_norm2_`` and ``count_``,
        the residuals' ``resid_sum_``, ``resid_sq_``, ``resid_weight_`` and ``resid_at_``
        (``K`` each); with a ``half_life``, ``sum_x2_sq_`` (``K d``) and ``aged_at_`` (``K``)
        too."""
        k = n_classes or 0
        forgets = params.get("half_life") is not None
        return ITEM_BYTES * ((3 if forgets else 2) * k * n_features + 2
                             + (5 if forgets else 4) * k)

    def _lambdas(self, sum_norm2: np.ndarray, count: np.ndarray) -> np.ndarray:
        """``lambda`` for running sums ``sum_norm2`` over ``count`` events (elementwise),
        at least :data:`MIN_LAMBDA`."""
        scale = np.divide(sum_norm2, count, out=np.ones_like(sum_norm2, dtype=np.float64),
                          where=(count > 0) & (sum_norm2 > 0.0))
        lam: np.ndarray = np.maximum(self.ridge * scale, MIN_LAMBDA)
        return lam

    def ridge_strength(self) -> float:
        """Current ``lambda = ridge * mean ||x||^2`` over learned events (``ridge`` if none).

        Same floating-point operations as :meth:`_lambdas`, in scalar form.
        """
        n, total = self.count_, self.sum_norm2_
        return max(self.ridge * (total / n) if n > 0 and total > 0.0 else self.ridge,
                   MIN_LAMBDA)

    def _precisions(self) -> np.ndarray:
        """Width weights per arm and feature: ``P = 1 / (lambda + sum_x2_)``, or with
        forgetting ``V~ / V^2`` aged to now (class docstring)."""
        if self._held_precisions is not None:
            return self._held_precisions
        lam = self.ridge_strength()
        if self.half_life is None:
            inv: np.ndarray = 1.0 / (lam + self.sum_x2_)
            return inv
        age = decay(self._gamma, self.count_ - self.aged_at_)[:, None]
        v = lam + age * self.sum_x2_
        weights: np.ndarray = (lam + age * age * self.sum_x2_sq_) / v / v  # v^2 may underflow
        return weights

    def effective_count(self) -> float:
        """Weight of the learned events: ``count_`` without forgetting, at most about
        ``half_life / ln 2`` with it."""
        return effective_count(self._gamma, self.count_)

    def _age(self, arms: np.ndarray, now: np.ndarray) -> None:
        """Age the precisions of ``arms`` (distinct) to the event counts ``now``."""
        age = decay(self._gamma, now - self.aged_at_[arms])[:, None]
        self.sum_x2_[arms] *= age
        self.sum_x2_sq_[arms] *= age * age
        self.aged_at_[arms] = now

    def _add_residuals(self, arms: np.ndarray, now: np.ndarray, resid: np.ndarray) -> None:
        """Age the residual sums of ``arms`` (distinct) to the event counts ``now`` and add
        the residuals ``resid`` of their events (class docstring)."""
        age = decay(self._calibration_gamma, now - self.resid_at_[arms])
        self.resid_sum_[arms] = self.resid_sum_[arms] * age + resid
        self.resid_sq_[arms] = self.resid_sq_[arms] * age + resid * resid
        self.resid_weight_[arms] = self.resid_weight_[arms] * age + 1.0
        self.resid_at_[arms] = now

    def reward_offset(self, arm: int) -> float:
        """``arm``'s mean recent residual shrunk by its noise (class docstring); 0 before
        any event of it.  The sums' common age cancels in the ratios."""
        weight = float(self.resid_weight_[arm])
        if weight <= 0.0:
            return 0.0
        mean = float(self.resid_sum_[arm]) / weight
        variance = max(float(self.resid_sq_[arm]) / weight - mean * mean, 0.0) / weight
        if mean * mean <= variance:
            return 0.0
        return mean * (1.0 - variance / (mean * mean))

    def _estimate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inv = self._precisions()
        return self.weights_ @ x, np.sqrt(inv @ (x * x))

    def decide_many(self, X: np.ndarray, explore: bool = True) -> list[Decision]:
        """:meth:`decide` for each row of ``X``, with ``P`` computed once for all of them (the
        ``K x d`` division is most of a decision's cost at large ``d``; ``P`` does not change
        between decisions, so these are the loop's decisions bit for bit)."""
        self._held_precisions = self._precisions()
        try:
            return [self.decide(x, explore) for x in X]
        finally:
            self._held_precisions = None

    def _decide_ucb_many(self, X: np.ndarray, explore: bool, alpha: float,
                         uniform_share: float) -> list[Decision]:
        """:meth:`_decide_ucb` for each row of ``X``: the loop's decisions and draws, bit for
        bit (:meth:`_ucb_columns`); a single row, or inputs the loop would refuse, take the
        loop itself."""
        columns = self._ucb_columns(X, explore, alpha, uniform_share)
        if columns is None:
            return [self._decide_ucb(x, explore, alpha, uniform_share)
                    for x in np.array(X, dtype=np.float64)]
        Xv, mean, greedy, played, prob = columns
        return [self._decision(x, m, g, a, q) for x, m, g, a, q in zip(
            Xv, mean, greedy.tolist(), played.tolist(), prob.tolist(), strict=True)]

    def _decide_ucb_contexts(self, X: np.ndarray, explore: bool, alpha: float,
                             uniform_share: float) -> Batch:
        """The contexts of :meth:`_decide_ucb_many` as columns, built from
        :meth:`_ucb_columns` without a decision per row (or stacked from the loop's)."""
        columns = self._ucb_columns(X, explore, alpha, uniform_share)
        if columns is None:
            return stack_events([d.context for d in
                                 self._decide_ucb_many(X, explore, alpha, uniform_share)])
        Xv, _, greedy, played, prob = columns
        return {"x": Xv, "greedy": greedy.astype(np.int64), "played": played.astype(np.int64),
                "prob": prob.astype(np.float64)}

    def _ucb_columns(self, X: np.ndarray, explore: bool, alpha: float, uniform_share: float
                     ) -> tuple[np.ndarray, ...] | None:
        """``(X, means, greedy, played, prob)`` of :meth:`_decide_ucb` for each row of ``X``,
        with the widths of all rows in one matrix product and one uniform draw per row taken
        at once; None for a single row or inputs the loop would refuse.

        Each row's means are the loop's own product ``weights_ @ x`` (they are
        logged as ``expected_reward``).  The batch widths may differ from the
        loop's in the last bits (another summation order), so a row whose two
        best optimistic scores are within rounding of each other is re-scored
        as the loop does.
        """
        Xv = np.array(X, dtype=np.float64)
        if (Xv.ndim != 2 or Xv.shape[1] != self.n_features or len(Xv) < 2
                or not np.isfinite(Xv).all()):
            return None
        n, k = Xv.shape[0], self.n_classes
        mean = np.stack([self.weights_ @ x for x in Xv])
        greedy = mean.argmax(axis=1)
        played, prob = greedy, np.ones(n)
        if explore:
            inv = self._precisions()
            width = np.sqrt((Xv * Xv) @ inv.T)
            bonus = mean + alpha * width
            played = bonus.argmax(axis=1)
            top2 = np.sort(bonus, axis=1)[:, -2:]
            tol = 8.0 * self.n_features * np.finfo(np.float64).eps * (
                np.abs(bonus).max(axis=1) + alpha * width.max(axis=1))
            for i in np.flatnonzero(top2[:, 1] - top2[:, 0] <= tol):
                x = Xv[i]
                played[i] = ucb_labels(mean[i], np.sqrt(inv @ (x * x)), alpha)[1]
            if uniform_share > 0.0:
                rows = np.arange(n)
                p = np.zeros((n, k))
                p[rows, played] = 1.0
                p = with_uniform_share(p, uniform_share)
                cdf = np.cumsum(p, axis=1)
                u = self._rng.random(len(Xv))
                played = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
                prob = p[rows, played]
        return Xv, mean, greedy, played, prob

    def learn_one(self, event: Event) -> None:
        x, played, click = self._check_event(event)
        x2 = x * x
        if self.half_life is not None:
            arm = np.array([played])
            self._age(arm, np.array([self.count_ + 1]))
            self.sum_x2_sq_[played] += x2
        gain = x / (self.ridge_strength() + self.sum_x2_[played])
        w = self.weights_[played]
        resid = click - w @ x
        self._add_residuals(np.array([played]), np.array([self.count_ + 1]), np.array([resid]))
        w += gain * (resid / (1.0 + x @ gain))
        self.sum_x2_[played] += x2
        self.sum_norm2_ += float(x2.sum())
        self.count_ += 1

    def learn_many(self, batch: Batch) -> None:
        """Learn a batch: the compiled pass of :mod:`app.learners.ridge_kernel` (one loop over
        the events), or without it :meth:`_learn_steps` (both equal sequential learning)."""
        X, played, click = self._check_batch(batch)
        n = X.shape[0]
        if n == 0:
            return
        if not jit.enabled():
            self._learn_steps(X, played, click)
            return
        self.sum_norm2_ = diag_ridge_pass(
            np.ascontiguousarray(X), played, np.ascontiguousarray(click), self.weights_,
            self.sum_x2_, self.sum_x2_sq_, self.aged_at_, self.resid_sum_, self.resid_sq_,
            self.resid_weight_, self.resid_at_, self.sum_norm2_, self.count_, self.ridge,
            MIN_LAMBDA, self._gamma, self._calibration_gamma, self.half_life is not None)
        self.count_ += n

    def _learn_steps(self, X: np.ndarray, played: np.ndarray, click: np.ndarray) -> None:
        """Learn a checked, non-empty batch in ``max_a n_a`` vectorised numpy steps (equals
        sequential, see class doc)."""
        n = X.shape[0]
        X2 = X * X
        # Running sums before each event; cumsum adds left to right, as learn_one does.
        sums = np.cumsum(np.r_[self.sum_norm2_, X2.sum(axis=1)])
        lam = self._lambdas(sums[:-1], self.count_ + np.arange(n))
        order = np.argsort(played, kind="stable")
        first = np.searchsorted(played[order], played[order], side="left")
        rank = np.empty(n, dtype=np.intp)
        rank[order] = np.arange(n) - first
        forgets = self.half_life is not None
        for step in range(int(rank.max()) + 1):
            sel = np.flatnonzero(rank == step)
            arms, xs = played[sel], X[sel]
            if forgets:
                self._age(arms, self.count_ + 1 + sel)
                self.sum_x2_sq_[arms] += X2[sel]
            gain = xs / (lam[sel, None] + self.sum_x2_[arms])
            resid = click[sel] - np.einsum("ij,ij->i", self.weights_[arms], xs)
            self._add_residuals(arms, self.count_ + 1 + sel, resid)
            self.weights_[arms] += gain * (resid / (1.0 + np.einsum("ij,ij->i", xs, gain)))[:, None]
            self.sum_x2_[arms] += X2[sel]
        self.sum_norm2_ = float(sums[-1])
        self.count_ += n

    def get_state(self) -> State:
        state = {
            "weights_": self.weights_.copy(),
            "sum_x2_": self.sum_x2_.copy(),
            "sum_norm2_": np.array(self.sum_norm2_),
            "count_": np.array(self.count_, dtype=np.int64),
            "resid_sum_": self.resid_sum_.copy(),
            "resid_sq_": self.resid_sq_.copy(),
            "resid_weight_": self.resid_weight_.copy(),
            "resid_at_": self.resid_at_.copy(),
        }
        if self.half_life is not None:
            state |= {"sum_x2_sq_": self.sum_x2_sq_.copy(), "aged_at_": self.aged_at_.copy()}
        return state

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Load ``state``; one saved before the residual sums existed starts them empty."""
        empty = {"resid_sum_": np.zeros(self.n_classes), "resid_sq_": np.zeros(self.n_classes),
                 "resid_weight_": np.zeros(self.n_classes),
                 "resid_at_": np.zeros(self.n_classes, dtype=np.int64)}
        checked = check_state(self.get_state(), {**empty, **state})
        if np.any(checked["sum_x2_"] < 0.0) or checked["sum_norm2_"] < 0.0 \
                or checked["count_"] < 0 or np.any(checked["resid_weight_"] < 0.0) \
                or np.any(checked["resid_sq_"] < 0.0):
            raise ParamError("state", "sums of squares, weights and the count must be "
                             "non-negative")
        if np.any(checked["resid_at_"] < 0) or np.any(checked["resid_at_"] > checked["count_"]):
            raise ParamError("state", "resid_at_ must lie in [0, count_]")
        if self.half_life is not None and (
                np.any(checked["sum_x2_sq_"] < 0.0) or np.any(checked["aged_at_"] < 0)
                or np.any(checked["aged_at_"] > checked["count_"])):
            raise ParamError("state", "aged sums must be non-negative and aged_at_ in "
                             "[0, count_]")
        self.weights_ = checked["weights_"]
        self.sum_x2_ = checked["sum_x2_"]
        self.sum_norm2_ = float(checked["sum_norm2_"])
        self.count_ = int(checked["count_"])
        self.resid_sum_, self.resid_sq_ = checked["resid_sum_"], checked["resid_sq_"]
        self.resid_weight_ = checked["resid_weight_"]
        self.resid_at_ = checked["resid_at_"]
        if self.half_life is not None:
            self.sum_x2_sq_, self.aged_at_ = checked["sum_x2_sq_"], checked["aged_at_"]


class LinUCBDiag(DiagRidge):
    """LinUCB on a per-arm diagonal ridge regression (``linucb_diag``).

    Plays ``argmax_a mean_a(x) + alpha * width_a(x)`` (see :class:`DiagRidge`
    for ``mean`` and ``width``), except on a ``uniform_share`` of the rounds,
    where the label is drawn uniformly; the logged probability is that of the
    mixture.  Ties go to the lowest label.  Clicks are learned raw; see the
    module docstring for the noise handling.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of labels ``K``.
    seed:
        Seed of the uniform-exploration draws.
    alpha:
        Width of the optimism bonus, on the scale of the observed clicks.
        0 is the greedy policy (it can lock onto the first label that ever
        clicks); larger values explore longer.  1 to 2 works without tuning.
    ridge:
        Ridge strength relative to the running mean of ``||x||^2``.  Larger
        values shrink the means more and keep the widths (hence exploration)
        large for longer; 0.5 worked on dense and binary features alike.
    uniform_share:
        Share of the rounds, in ``[0, 1)``, whose label is drawn uniformly at
        random (logged with its propensity).  These rounds are what the
        click-noise estimate is anchored on; 0 makes the policy deterministic
        and the noise rates unidentifiable from its plays.
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more
        events (:mod:`app.learners.forgetting`); null never forgets.  700
        (about 1,000 events' worth of data) recovers 0.93 of a fresh model's
        gap share 2,500-7,500 events after an abrupt change and costs 0.013 on
        a stationary stream (``docs/results/drift.md``).
    rho0, rho1:
        Click-noise rates ``P(click | wrong)`` and ``P(no click | right)``,
        used only to report ``expected_reward``; updated by
        :meth:`set_noise_rates` (e.g. from NREst).

    Attributes
    ----------
    weights_, sum_x2_:
        Per-arm weight rows and diagonal data precisions (:class:`DiagRidge`).
    sum_norm2_, count_:
        Sum of ``||x||^2`` and number of learned events (for ``lambda``).

    Examples
    --------
    Two labels; label ``a`` is right when ``x_a`` is the larger coordinate:

    >>> rng = np.random.default_rng(0)
    >>> model = LinUCBDiag(n_features=2, n_classes=2)
    >>> mistakes = []
    >>> for t in range(2000):
    ...     x = rng.random(2)
    ...     d = model.decide(x)
    ...     click = float(d.output["label"] == np.argmax(x))
    ...     mistakes.append(1.0 - click)
    ...     model.learn_one({**d.context, "click": click})
    >>> float(np.mean(mistakes[-500:])) < 0.1
    True
    """

    paper = (
        "Li, Chu, Langford & Schapire 2010, *A Contextual-Bandit Approach to Personalized "
        "News Article Recommendation*, Algorithm 1, on a diagonal ridge regression (this "
        "project)"
    )

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None = None,
                 alpha: float = 1.0, ridge: float = 0.5, uniform_share: float = 0.05,
                 half_life: float | None = 700.0, rho0: float = 0.0,
                 rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1, ridge=ridge, half_life=half_life)
        self.alpha = check_non_negative("alpha", alpha)
        self.uniform_share = check_uniform_share(uniform_share)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        return self._decide_ucb(x, explore, self.alpha, self.uniform_share)

    def decide_many(self, X: np.ndarray, explore: bool = True) -> list[Decision]:
        """:meth:`decide` for each row of ``X`` (:meth:`_decide_ucb_many`)."""
        return self._decide_ucb_many(X, explore, self.alpha, self.uniform_share)

    def decide_contexts(self, X: np.ndarray, explore: bool = True) -> Batch:
        """:meth:`decide_many`'s contexts as columns (:meth:`_decide_ucb_contexts`)."""
        return self._decide_ucb_contexts(X, explore, self.alpha, self.uniform_share)


class SquareCBDiag(DiagRidge):
    """SquareCB on a per-arm diagonal ridge regression (``squarecb_diag``).

    Foster & Rakhlin (2020), "Beyond UCB", Algorithm 1 with the regression
    oracle of :class:`DiagRidge`: with ``t`` = 1 + number of learned events
    and ``gamma_t = gamma_scale * sqrt(t)``, the played label is drawn from
    the inverse-gap-weighted distribution (:func:`igw_probabilities`)

        p_a = 1 / (K + gamma_t * (mean_b - mean_a)),  a != b = argmax mean,
        p_b = 1 - sum_{a != b} p_a,

    and its probability ``p_played``, the one used for the draw, is logged as
    ``prob`` (usable for inverse-propensity off-policy evaluation).  With
    ``explore=False`` the greedy label is returned with probability 1.0.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of labels ``K``.
    seed:
        Seed of the generator drawing the played label.
    gamma_scale:
        ``c`` in ``gamma_t = c * sqrt(t)``.  Larger values exploit sooner
        (a label whose mean trails by ``g`` keeps probability about
        ``1 / (c g sqrt(t))``); 0 plays uniformly at random.  10 works
        without tuning for clicks in ``[0, 1]``.
    ridge:
        Ridge strength relative to the running mean of ``||x||^2``
        (:class:`DiagRidge`); larger values shrink the means, hence the gaps.
    half_life:
        Forgetting, in events: an event weighs half after ``half_life`` more
        events (:mod:`app.learners.forgetting`); null never forgets.
    rho0, rho1:
        Click-noise rates, used only to report ``expected_reward``; updated by
        :meth:`set_noise_rates`.

    Attributes
    ----------
    weights_, sum_x2_:
        Per-arm weight rows and diagonal data precisions (:class:`DiagRidge`).
    sum_norm2_, count_:
        Sum of ``||x||^2`` and number of learned events (for ``lambda``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = SquareCBDiag(n_features=2, n_classes=2, seed=1)
    >>> mistakes = []
    >>> for t in range(2000):
    ...     x = rng.random(2)
    ...     d = model.decide(x)
    ...     click = float(d.output["label"] == np.argmax(x))
    ...     mistakes.append(1.0 - click)
    ...     model.learn_one({**d.context, "click": click})
    >>> float(np.mean(mistakes[-500:])) < 0.1
    True
    """

    paper = (
        "Foster & Rakhlin 2020, *Beyond UCB: Optimal and Efficient Contextual Bandits "
        "with Regression Oracles*, Algorithm 1, with a diagonal ridge oracle (this "
        "project)"
    )

    def __init__(self, *, n_features: int, n_classes: int, seed: int | None = None,
                 gamma_scale: float = 10.0, ridge: float = 0.5, half_life: float | None = None,
                 rho0: float = 0.0, rho1: float = 0.0) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed,
                         rho0=rho0, rho1=rho1, ridge=ridge, half_life=half_life)
        self.gamma_scale = check_non_negative("gamma_scale", gamma_scale)

    def gamma(self) -> float:
        """Current ``gamma_t = gamma_scale * sqrt(1 + learned events)``, the events counted
        with their forgetting weights (:meth:`~DiagRidge.effective_count`): a model that
        forgets keeps exploring as a model of its effective age does."""
        return self.gamma_scale * float(np.sqrt(1.0 + self.effective_count()))

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The exploration distribution over labels for input ``x``."""
        mean, _ = self._estimate(self._input(x))
        return igw_probabilities(mean, self.gamma())

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        x = self._input(x, copy=True)
        mean, _ = self._estimate(x)
        greedy = int(mean.argmax())
        if not explore:
            return self._decision(x, mean, greedy, greedy, 1.0)
        return self._draw(x, mean, greedy, igw_probabilities(mean, self.gamma()))
