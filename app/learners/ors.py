"""Online regression with noisy labels: ORS scaling and the NLMS reference (Moroshko & Crammer, P3).

Both learners keep one weight vector ``w`` (``w_0 = 0``), predict
``ŷ = wᵀx`` and, given one or more noisy labels ``ỹ_1..ỹ_k`` of the clean
target ``y`` (``E ỹ_i = y``, ``E(ỹ_i - y)² = v``), take the step that
minimises the shrunk objective of Moroshko & Crammer, eq. (3) with the
example scaled by ``√α`` (P3 eq. (4), Fig. 1):

    C̃(w; α) = ½‖w - w_{t-1}‖² + α/(2r)·(ȳ - wᵀx)²
    w_t = w_{t-1} + α·(ȳ - ŷ)·x / (r + α‖x‖²)                       (4)

where ``ȳ`` is the mean of the labels and ``ŷ = w_{t-1}ᵀx`` is computed with
the *current* weights when the feedback is applied (our reading for delayed feedback; the update is
state-dependent, so events are applied in order).  :class:`NLMS` is the
"noisy feedback" reference ``α ≡ 1`` (regularised NLMS, P3 Section 4.1);
:class:`ORS` chooses ``α`` per event:

* rule (5), the expected-objective minimiser (paper §3, eq. (5)), with a
  residual estimate ``ê`` for the unknown ``y - ŷ`` and a variance ``V`` of
  the label ``ȳ``::

      α = r·ê² / (r·ê² + (r + ‖x‖²)·V)      (α = 1 when ê² = V = 0)

* rule (6): ``α = 1/(1 + β·V)``.

How ``ê`` and ``V`` are obtained (paper §4.1 and §4.2):

============  =========================  =====================  ===========================
rule          known ``v`` (``V = v/k``)  unknown, one label      unknown, ``k >= 2`` labels
============  =========================  =====================  ===========================
beta          (6) with ``V = v/k``       (6), ``V = (ỹ-ŷ)²/4``   (6), ``V`` = ``k_variance``
one_sample    (5), ``ê = ȳ - ŷ``         variant 8 (below)       (5), ``ê = ȳ - ŷ``, ``k_variance``
pred          (5), ``ê = (ȳ - ŷ)/2``     variant 8               (5), ``ê = ȳ - ŷ``, ``k_variance``
two_sample    (5), ``ê = ȳ - ŷ``         refused (needs k >= 2)  (5), ``ê = ȳ - ŷ``, ``k_variance``
============  =========================  =====================  ===========================

Variant 8 ("one sample and pred", unknown variance) estimates ``y`` by
``(ỹ + ŷ)/2`` and ``v`` by ``(ỹ - ŷ)²/4``; then ``ê² = V`` and rule (5)
collapses to the data-independent ``α = r/(2r + ‖x‖²)``, half the unscaled
step.  With ``k >= 2`` labels and unknown
variance, ``k_variance`` says how the variance of the mean ``ȳ`` is
estimated: ``"pred"`` (default [ours]: the mean is treated as one label of
variant 8, ``ê = (ȳ - ŷ)/2`` and ``V = ê²``, so ``α = r/(2r + ‖x‖²)``),
``"sample"`` (``s²/k`` with the unbiased ``s²``, this project's reading of
the paper's "sample variance"; for ``k = 2`` it is the paper's
``(ỹ_1 - ỹ_2)²/4``, variant 9) or ``"population"`` (the ddof=0 sample
variance).  The sample estimates make ``α = ê²/(ê² + V)``-like factors
random, and largest when the realised noise of ``ȳ`` is largest (``ê²``
grows with it while ``V`` is independent of it for Gaussian noise).  With a
small ``r`` the step is nearly a full NLMS step and that factor makes a
second label *hurt*; ``"pred"`` makes extra labels help at every ``r``
(measurements in ``docs/results/regression.md``).

Feedback fields: ``values`` (1-D float array of >= 1 noisy labels; trailing
``NaN`` entries are padding so that events with different label counts
stack into one batch) and ``variance`` (the known per-label noise variance
``v >= 0``, or ``NaN`` when unknown).  Logged context: ``x`` and
``prediction`` (``ŷ`` at decision time, for reporting only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    Decision,
    Event,
    Learner,
    ParamError,
    State,
    check_input,
    check_int,
    check_non_negative,
    check_positive,
    check_state,
)

#: Scaling rules of :class:`ORS`; the first is the default.
ALPHA_RULES: tuple[str, ...] = ("pred", "one_sample", "two_sample", "beta")

#: Estimates of the variance of a k-label mean (unknown variance); first is default.
K_VARIANCES: tuple[str, ...] = ("pred", "sample", "population")

#: Default regulariser: of the order of ``‖x‖²`` for the paper's d = 20 inputs
#: (see docs/results/regression.md for the measurements behind it).
DEFAULT_R = 30.0


def noisy_labels(values: Any) -> np.ndarray:
    """The finite labels of a ``values`` feedback field (``NaN`` entries are padding).

    Raises :class:`ParamError` (field ``values``) when the field is not 1-D,
    holds an infinite value or holds no label at all.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ParamError("values", f"must be a 1-D list of labels, got shape {arr.shape}")
    if np.any(np.isinf(arr)):
        raise ParamError("values", "contains non-finite labels")
    labels = arr[~np.isnan(arr)]
    if labels.size == 0:
        raise ParamError("values", "needs at least one label")
    return labels


def known_variance(variance: Any) -> float | None:
    """The known noise variance of a feedback, or ``None`` when it is ``NaN``/absent.

    Raises :class:`ParamError` (field ``variance``) for negative or infinite values.
    """
    if variance is None:
        return None
    v = float(np.asarray(variance, dtype=np.float64).reshape(()))
    if math.isnan(v):
        return None
    if not math.isfinite(v) or v < 0:
        raise ParamError("variance", f"must be a finite number >= 0, got {v!r}")
    return v


def optimal_alpha(e2: float, v: float, r: float, xx: float) -> float:
    """Rule (5) in the stable form ``r·e²/(r·e² + (r + ‖x‖²)·v)`` (P3 eq. (5)).

    ``e2`` is the squared residual estimate, ``v`` the variance of the label
    used in (4), ``xx = ‖x‖²``.  Returns 1 when ``e2 = v = 0`` and a value in
    ``[0, 1]`` otherwise; written as ``r/(r + (r + ‖x‖²)·v/e²)`` so that huge
    or tiny residuals cannot produce ``inf/inf``.

    >>> optimal_alpha(1.0, 0.0, 30.0, 20.0), optimal_alpha(0.0, 1.0, 30.0, 20.0)
    (1.0, 0.0)
    >>> round(optimal_alpha(1.0, 1.0, 30.0, 20.0), 6)   # 30 / (30 + 50)
    0.375
    """
    if e2 == 0.0:
        return 1.0 if v == 0.0 else 0.0
    with np.errstate(over="ignore"):
        ratio = float(np.float64(v) / np.float64(e2))
    return r / (r + (r + xx) * ratio)


class _LinearRegression(Learner):
    """Shared part of :class:`NLMS` and :class:`ORS`: prediction, step (4), state."""

    task: ClassVar[str] = "regression"
    feedback_fields: ClassVar[tuple[str, ...]] = ("values", "variance")
    logged_only: ClassVar[bool] = False

    def __init__(self, *, n_features: int, seed: int | None = None, r: float = DEFAULT_R
                 ) -> None:
        self.n_features = check_int("n_features", n_features, 1)
        self.seed = seed
        self.r = r
        self.w_ = np.zeros(self.n_features)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``w_``: ``d`` floats."""
        return ITEM_BYTES * n_features

    def predict(self, x: np.ndarray) -> float:
        """The prediction ``wᵀx`` with the current weights (no logging)."""
        return float(self.w_ @ check_input(x, self.n_features))

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Predict ``value = wᵀx``; log ``x`` and the prediction (``explore`` is unused)."""
        xs = check_input(x, self.n_features)
        value = float(self.w_ @ xs)
        return Decision(output={"value": value},
                        context={"x": xs.copy(), "prediction": np.array(value)})

    def learn_one(self, event: Event) -> None:
        """Apply step (4) for one event with ``α`` from :meth:`alpha` (P3 eq. (4)).

        The residual uses the current weights.  An all-zero ``x`` leaves the
        weights unchanged; an update that would overflow is
        refused with :class:`ParamError` and leaves the weights unchanged.
        """
        x = check_input(event["x"], self.n_features)
        labels = noisy_labels(event["values"])
        v = known_variance(event.get("variance"))
        xx = float(x @ x)
        if xx == 0.0:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            prediction = float(self.w_ @ x)
            alpha = self.alpha(labels, prediction, v, xx)
            residual = float(labels.sum()) / labels.size - prediction
            w = self.w_ + (alpha * residual / (self.r + alpha * xx)) * x
        if not np.all(np.isfinite(w)):
            raise ParamError("values", "update overflows; labels are out of range")
        self.w_ = w

    def alpha(self, labels: np.ndarray, prediction: float, variance: float | None,
              xx: float) -> float:
        """Scaling factor ``α ∈ [0, 1]`` of step (4) for one event."""
        return 1.0

    def get_state(self) -> State:
        """``{"w_": weights}`` (a copy)."""
        return {"w_": self.w_.copy()}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the weights (shape ``(n_features,)``, finite)."""
        self.w_ = check_state(self.get_state(), state)["w_"]


class NLMS(_LinearRegression):
    """Regularised NLMS, the "noisy feedback" reference of ORS (``α ≡ 1``, P3 Section 4.1).

    ``w ← w + (ȳ - wᵀx)·x / (r + ‖x‖²)`` with ``ȳ`` the mean of the noisy
    labels; ``r = 0`` is plain NLMS (after the step ``wᵀx = ȳ`` exactly).

    Parameters
    ----------
    n_features:
        Input dimension ``d``.
    seed:
        Unused (the learner is deterministic); accepted for a uniform constructor.
    r:
        Regulariser, ``r >= 0``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> u = rng.standard_normal(5)
    >>> model = NLMS(n_features=5, r=1.0)
    >>> for _ in range(300):
    ...     x = rng.standard_normal(5)
    ...     model.learn_one({"x": x, "values": [x @ u], "variance": np.nan})
    >>> bool(np.allclose(model.w_, u, atol=1e-6))
    True
    """

    paper = (
        "Moroshko & Crammer, *Online Regression with Controlled Label Noise Rate*, the "
        "regularised NLMS baseline"
    )

    def __init__(self, *, n_features: int, seed: int | None = None, r: float = DEFAULT_R
                 ) -> None:
        super().__init__(n_features=n_features, seed=seed,
                         r=check_non_negative("r", r))


class ORS(_LinearRegression):
    """Online Regression with Scaling (Moroshko & Crammer, Fig. 1, eq. (4)-(6), Section 4).

    Step (4) with ``α`` from rule (5) or (6); see the module docstring for
    how each ``alpha_rule`` estimates the residual and the label variance
    with known or unknown noise variance and with one or ``k`` labels.

    Parameters
    ----------
    n_features:
        Input dimension ``d``.
    seed:
        Unused (the learner is deterministic); accepted for a uniform constructor.
    r:
        Regulariser of objective (3), ``r > 0``.
    alpha_rule:
        ``"pred"`` (default; "one sample and pred"), ``"one_sample"``,
        ``"two_sample"`` (every event must carry >= 2 labels) or ``"beta"``
        (rule (6)).
    beta:
        ``β >= 0`` of rule (6); used only by ``alpha_rule="beta"``.
    k_variance:
        Estimate of the variance of a k-label mean when the variance is
        unknown: ``"pred"`` (default), ``"sample"`` (``s²/k``, the paper's
        two-sample rule) or ``"population"``.

    Examples
    --------
    Unknown label noise of variance 1: the scaled learner ends closer to the
    target than the unscaled one.

    >>> rng = np.random.default_rng(1)
    >>> u = rng.standard_normal(20)
    >>> ors, nlms = ORS(n_features=20), NLMS(n_features=20)
    >>> for _ in range(3000):
    ...     x = rng.standard_normal(20)
    ...     event = {"x": x, "values": [x @ u + rng.standard_normal()], "variance": np.nan}
    ...     ors.learn_one(event); nlms.learn_one(event)
    >>> bool(np.sum((ors.w_ - u) ** 2) < np.sum((nlms.w_ - u) ** 2))
    True
    """

    paper = (
        "Moroshko & Crammer, *Online Regression with Controlled Label Noise Rate*, Figure "
        "1 and Section 4 (label budgets)"
    )

    def __init__(
        self,
        *,
        n_features: int,
        seed: int | None = None,
        r: float = DEFAULT_R,
        alpha_rule: str = "pred",
        beta: float = 1.0,
        k_variance: str = "pred",
    ) -> None:
        super().__init__(n_features=n_features, seed=seed,
                         r=check_positive("r", r))
        if alpha_rule not in ALPHA_RULES:
            raise ParamError("alpha_rule", f"must be one of {list(ALPHA_RULES)}, "
                             f"got {alpha_rule!r}")
        if k_variance not in K_VARIANCES:
            raise ParamError("k_variance", f"must be one of {list(K_VARIANCES)}, "
                             f"got {k_variance!r}")
        self.alpha_rule = alpha_rule
        self.beta = check_non_negative("beta", beta)
        self.k_variance = k_variance

    @classmethod
    def labels_per_event(cls, params: Mapping[str, Any]) -> int:
        """2 with ``alpha_rule="two_sample"`` (it needs two labels per event), else 1."""
        return 2 if params.get("alpha_rule") == "two_sample" else 1

    def alpha(self, labels: np.ndarray, prediction: float, variance: float | None,
              xx: float) -> float:
        """``α`` of rule (5) or (6) for one event (table in the module docstring)."""
        k = labels.size
        if self.alpha_rule == "two_sample" and k < 2:
            raise ParamError("values", "alpha_rule 'two_sample' needs at least 2 labels")
        residual = float(labels.sum()) / k - prediction
        if variance is not None:
            v = variance / k
            e = residual / 2 if self.alpha_rule == "pred" else residual
        elif k == 1 or self.k_variance == "pred":
            # Variant 8: ê = (ȳ - ŷ)/2 and V = ê², so (5) gives r/(2r + ‖x‖²).
            if self.alpha_rule == "beta":
                return 1.0 / (1.0 + self.beta * residual * residual / 4)
            return self.r / (2 * self.r + xx)
        else:
            ddof = 1 if self.k_variance == "sample" else 0
            with np.errstate(over="ignore", invalid="ignore"):
                v = float(np.var(labels, ddof=ddof))
            if self.k_variance == "sample":
                v /= k
            e = residual
        if self.alpha_rule == "beta":
            return 1.0 / (1.0 + self.beta * v)
        return optimal_alpha(e * e, v, self.r, xx)
