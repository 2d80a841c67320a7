"""Kernel online gradient descent on noisy copies of the inputs (paper P5, Algorithm 1).

Each instance ``x_t`` is only seen through independent noisy copies
``x~ = x_t + Z`` (``E[Z] = 0``).  P5's Algorithm 1 replaces the gradient
``l'(<w, Psi(x_t)>) Psi(x_t)`` of kernel OGD by the product of two
independent unbiased estimates -- ``Psi~(x_t)`` (Map_Estimate) and the
gradient length ``g~`` (random-order Taylor estimate of ``l'``) -- built from
a random, usually small, number of copies::

    w <- Proj_{||w||^2 <= B_w}( w - eta_t g~_t Psi~(x_t) )

The protocol of a round (P5 Section 2, with delayed feedback):

1. ``decide(x)`` gets one noisy copy, returns ``{"value": <w, Psi(x)>,
   "copies_needed": k}`` and logs ``x`` with the round's **plan** (every
   random order of the round, drawn now from the seeded generator).  The
   value plugs the copy into ``Psi``; it is biased for non-linear kernels but
   it is all one copy allows (the metric of the replay uses the clean point).
2. The feedback carries ``target`` and ``copies``, a ``(k', d)`` array of
   further copies.  :meth:`KernelOGD.copies_needed` says how many the logged
   plan requires; ``learn_one`` refuses fewer (the service answers
   ``"more_copies": k - k'`` instead of biasing the estimate) and ignores
   rows beyond ``k`` (so batches may be padded, e.g. with NaN).  The copy
   logged at decision time is the first copy consumed.
3. Updates depend on the current ``w``: apply them in order (SD).

Special cases: ``estimator="two_copy"`` (the default, ``"auto"``, for the
linear kernel with the squared loss) is P5's two-copy case,
``w <- w - eta_t 2 (<w, x~'> - y) x~`` with exactly two copies per round;
``naive=True`` is plain kernel OGD (P5 Section 3.1) on the single logged copy -- the
baseline, which converges to an attenuated solution.
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
    check_positive,
    check_range,
    check_state,
    size_param,
)
from app.learners.kernels.estimators import MapEstimate, TaylorEstimator
from app.learners.kernels.functions import make_loss, parse_kernel
from app.learners.kernels.support import EVICTIONS, FeatureStore, SupportStore

SCHEDULES: tuple[str, ...] = ("constant", "sqrt_t")
ESTIMATORS: tuple[str, ...] = ("auto", "taylor", "two_copy")
GRADIENT_ORDERS: tuple[str, ...] = ("fixed", "random")


class KernelOGD(Learner):
    """P5 Algorithm 1 with corrected estimators and bounded memory.

    Parameters
    ----------
    n_features:
        Input dimension ``d``.
    seed:
        Seed of the generator drawing the plans.
    kernel:
        ``"linear"``, ``"poly:DEG"`` (``(1 + <x, x'>)^DEG``), ``"exp"``
        (``exp(<x, x'>)``) or ``"gaussian:SIGMA2"`` (``exp(-||x-x'||^2/SIGMA2)``).
    loss:
        ``"squared"`` or ``"smooth_abs"`` (regression, real ``target``);
        ``"exp"`` or ``"smooth_hinge"`` (classification, ``target`` in {-1, +1}).
    smoothing:
        ``s`` of the smoothed losses.
    p:
        Geometric parameter ``p > 1``: ``E[queries] = p/(p-1)^2`` per round for
        dot-product kernels, ``3p/(p-1)^2`` for the Gaussian (P5 Thm. 4).
    eta, schedule:
        Step ``eta_t = eta`` (``"constant"``; P5's ``eta/sqrt(T)`` for a known
        horizon ``T``) or ``eta/sqrt(t)`` (``"sqrt_t"``).  The default
        0.006 is P5's ``eta/sqrt(T)`` with ``eta = 0.33``, ``T = 3000``, the
        step that learns friedman1 with ``gaussian:5`` (the ``sqrt_t``
        schedule did not learn in 3,000 rounds).
    norm_bound:
        ``B_w``: ``||w||^2`` is projected onto ``[0, B_w]`` after each update.
    budget:
        Maximum number of stored high-level terms (see
        :mod:`app.learners.kernels.support`); the naive baseline keeps at most
        ``budget`` support vectors.
    eviction:
        ``"smallest"`` (norm of the term) or ``"oldest"``.
    explicit_dim:
        Levels ``n`` with ``d^n <= explicit_dim`` are summed exactly into
        explicit tensors (0: none).
    max_order:
        Cap on every geometric order (bias at most ``p^-max_order``).
    estimator:
        ``"taylor"`` (P5), ``"two_copy"`` (linear kernel and squared loss only)
        or ``"auto"`` (``two_copy`` when it applies).
    gradient_order:
        ``"random"``: P5's geometric order ``C`` of the gradient-length
        estimate; ``"fixed"`` (default): for a polynomial ``l'`` (the squared
        loss) ``C`` is its degree and ``g~ = sum_n gamma_n prod_j u_j``, still
        unbiased with less variance; other losses always use
        the random order.
    naive:
        Plain OGD on the single logged copy (the biased baseline).

    Attributes
    ----------
    t_:
        Number of updates applied.

    Examples
    --------
    Linear regression seen through noisy copies (noise std 1):

    >>> from app.learners.base import stack_events
    >>> rng = np.random.default_rng(0)
    >>> w_true = np.array([1.0, -0.5])
    >>> model = KernelOGD(n_features=2, seed=0, kernel="linear", eta=0.01)
    >>> for _ in range(3000):
    ...     x = rng.normal(size=2)
    ...     d = model.decide(x + rng.normal(size=2))
    ...     k = model.copies_needed(d.context)
    ...     copies = x + rng.normal(size=(k, 2))
    ...     model.learn_one({**d.context, "target": float(w_true @ x), "copies": copies})
    >>> w = model.get_state()["tensor_"][1:3]       # the explicit level-1 tensor
    >>> bool(np.allclose(w, w_true, atol=0.2))
    True
    """

    paper = (
        "Cesa-Bianchi, Shalev-Shwartz & Shamir, *Online Learning of Noisy Data with "
        "Kernels*, Algorithm 1"
    )

    task: ClassVar[str] = "noisy_input"
    feedback_fields: ClassVar[tuple[str, ...]] = ("target", "copies")
    logged_only: ClassVar[bool] = False
    service_defaults: ClassVar[Mapping[str, Any]] = {"budget": 200, "max_order": 12}
    """The snapshot holds ``budget x max_order x n_features`` floats for the support list
    (plus the explicit low-level tensors): the constructor's defaults (1000 x 30) make it
    24 MB at d = 100, these 1.9 MB.  With the exact low levels, friedman1 stored only 172
    terms in 3,000 rounds and a budget of 100 learned as well as 1,000
    (``docs/results/kernels.md``, part C); orders above 12 are drawn with probability
    2^-12 at p = 2."""

    def __init__(
        self,
        n_features: int,
        seed: int | None = None,
        kernel: str = "gaussian:5",
        loss: str = "squared",
        smoothing: float = 1.0,
        p: float = 2.0,
        eta: float = 0.006,
        schedule: str = "constant",
        norm_bound: float = 100.0,
        budget: int = 1000,
        eviction: str = "smallest",
        explicit_dim: int = 4096,
        max_order: int = 30,
        estimator: str = "auto",
        gradient_order: str = "fixed",
        naive: bool = False,
    ) -> None:
        self.n_features = check_int("n_features", n_features, 1)
        self.seed = seed
        self.kernel = kernel
        self.loss = loss
        self.smoothing = check_range("smoothing", smoothing, 0.0, math.inf, low_open=True)
        self.p = check_range("p", p, 1.0, math.inf, low_open=True, high_open=True)
        self.eta = check_positive("eta", eta)
        self.schedule = _check_choice("schedule", schedule, SCHEDULES)
        self.norm_bound = check_positive("norm_bound", norm_bound)
        self.budget = check_int("budget", budget, 1)
        self.eviction = _check_choice("eviction", eviction, EVICTIONS)
        self.explicit_dim = check_int("explicit_dim", explicit_dim, 0)
        self.max_order = check_int("max_order", max_order, 1, 200)
        self.estimator = _check_choice("estimator", estimator, ESTIMATORS)
        self.gradient_order = _check_choice("gradient_order", gradient_order, GRADIENT_ORDERS)
        if not isinstance(naive, (bool, np.bool_)):
            raise ParamError("naive", f"must be a boolean, got {naive!r}")
        self.naive = bool(naive)
        self._kernel = parse_kernel(kernel)
        self._loss = make_loss(loss, self.smoothing)
        linear_squared = self._kernel.name == "linear" and loss == "squared"
        if estimator == "two_copy" and not linear_squared:
            raise ParamError("estimator", "two_copy needs kernel='linear' and loss='squared'")
        self._estimator = TaylorEstimator(
            self._kernel, self._loss, self.p, self.max_order,
            deterministic=estimator == "two_copy" or (estimator == "auto" and linear_squared),
            fixed_order=gradient_order == "fixed")
        self._store: FeatureStore | SupportStore
        if self.naive and self._kernel.name != "linear":
            self._store = SupportStore(self._kernel, self.n_features, self.budget, self.eviction)
        else:
            self._store = FeatureStore(self._kernel, self.n_features, self.budget,
                                       self.max_order, self.explicit_dim, self.eviction)
        self.t_ = 0
        self._rng = np.random.default_rng(seed)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """The store's arrays (support list, or estimate list and explicit tensors) and ``t_``."""
        budget = size_param(params, "budget")
        if params.get("naive") and parse_kernel(params["kernel"]).name != "linear":
            return SupportStore.state_bytes(n_features, budget) + ITEM_BYTES
        return FeatureStore.state_bytes(n_features, budget, size_param(params, "max_order"),
                                        size_param(params, "explicit_dim")) + ITEM_BYTES

    # -- protocol ---------------------------------------------------------------------------

    @property
    def classification(self) -> bool:
        """Whether the loss is a classification loss (``target`` in {-1, +1})."""
        return self._loss.classification

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Predict ``<w, Psi(x)>`` from one noisy copy and draw the round's plan.

        ``output``: ``value`` (and ``label`` = its sign for classification
        losses) and ``copies_needed``; ``context``: ``x`` and ``plan``.  With
        ``explore=False`` nothing is drawn (the generator does not advance):
        the plan is all ``-1`` and such a decision cannot be learned from.
        """
        x = check_input(x, self.n_features)
        value = self.predict(x)
        if self.naive:
            plan = np.zeros(0, dtype=np.int64)
        elif explore:
            plan = self._estimator.draw_plan(self._rng)
        else:
            plan = np.full(self._estimator.plan_length, -1, dtype=np.int64)
        needed = 0 if plan.size and plan[0] < 0 else self._needed(plan)
        output: dict[str, Any] = {"value": value, "copies_needed": needed}
        if self._loss.classification:
            output["label"] = 1 if value >= 0 else -1
        return Decision(output=output, context={"x": x.copy(), "plan": plan})

    def predict(self, x: np.ndarray) -> float:
        """``<w, Psi(x)>`` at ``x`` (no randomness; the replay uses it on clean points)."""
        return self._store.value(check_input(x, self.n_features))

    def copies_needed(self, context: Mapping[str, Any]) -> int:
        """Copies the feedback of the logged round must carry besides the logged ``x``.

        A pure function of the logged ``plan`` (drawn at decision time from the
        seeded generator), so it gives the same answer in the API and in the
        trainer, however late the feedback arrives.
        """
        return self._needed(self._check_plan(context["plan"]))

    def queries_used(self, context: Mapping[str, Any]) -> int:
        """Copies the update of the logged round consumes, the logged one included
        (0 when the update is zero whatever the copies)."""
        if self.naive:
            return 1
        return self._estimator.plan_queries(self._check_plan(context["plan"]))

    def expected_queries(self) -> float:
        """Expected queries per round of the plan, before skipping: P5's
        ``m p/(p-1)^2`` (``m`` = 1 for dot-product kernels, 3 for the Gaussian)
        with the random gradient order, ``m (1 + D)/(p-1)`` with the fixed order
        ``D``; 2 for ``two_copy``, 1 for ``naive``.

        The learner uses fewer when ``gamma_C = 0`` or a level is absent (it
        skips queries whose result cannot matter).
        """
        if self.naive:
            return 1.0
        if self._estimator.deterministic:
            return 2.0
        m = 3.0 if self._kernel.gaussian else 1.0
        fixed = self._estimator.fixed_degree
        if fixed is None:
            return m * self.p / (self.p - 1.0) ** 2
        return m * (1 + fixed) / (self.p - 1.0)

    def support_terms(self) -> int:
        """Number of stored support terms (the budgeted list, or the naive support set)."""
        return int(np.count_nonzero(self._store.stamp >= 0))

    def learn_one(self, event: Event) -> None:
        """One update ``w <- Proj(w - eta_t g~ Psi~(x_t))``; raises ParamError on too few copies."""
        x = check_input(event["x"], self.n_features)
        plan = self._check_plan(event["plan"])
        y = self._check_target(event["target"])
        pool = self._pool(x, plan, event["copies"])
        self.t_ += 1
        step = self.eta / math.sqrt(self.t_) if self.schedule == "sqrt_t" else self.eta
        if self.naive:
            self._learn_naive(x, y, step)
        else:
            g, psi = self._estimator.estimate(plan, pool, y, self._feature_store().inner)
            self._feature_store().add(-step * g, psi)
        if self._store.norm2 > self.norm_bound:
            self._store.scale(math.sqrt(self.norm_bound / self._store.norm2))

    def get_state(self) -> State:
        """Learned arrays: the store's (``tensor_``, ``coef_``, ... or ``support_``,
        ``alpha_``, ...) and ``t_``; shapes fixed by the hyper-parameters."""
        return {**self._store.get_state(), "t_": np.array([self.t_], dtype=np.int64)}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the learned arrays (names and shapes as in :meth:`get_state`)."""
        checked = check_state(self.get_state(), state)
        self._store.set_state(checked)
        self.t_ = int(checked["t_"][0])

    # -- helpers ----------------------------------------------------------------------------

    def _feature_store(self) -> FeatureStore:
        assert isinstance(self._store, FeatureStore)
        return self._store

    def _needed(self, plan: np.ndarray) -> int:
        return 0 if self.naive else max(0, self._estimator.plan_queries(plan) - 1)

    def _learn_naive(self, x: np.ndarray, y: float, step: float) -> None:
        """Plain OGD step on the logged copy: ``-step * kappa * l'(u) * Psi(x~)``."""
        loss = self._loss
        value = self._store.value(x)
        g = y * loss.derivative(y * value) if loss.classification else loss.derivative(value - y)
        if isinstance(self._store, SupportStore):
            self._store.add(-step * g, x)
        else:
            self._store.add(-step * g, MapEstimate(1, 1.0, x[None]))

    def _check_plan(self, plan: Any) -> np.ndarray:
        arr = np.asarray(plan)
        expected = 0 if self.naive else self._estimator.plan_length
        if arr.shape != (expected,) or (arr.size and arr.dtype.kind not in "iu"):
            raise ParamError("plan", f"expected an int array of shape ({expected},), "
                             f"got {arr.dtype} {arr.shape}")
        if arr.size and arr[0] < 0:
            raise ParamError("plan", "a decision made with explore=False cannot be learned from")
        if arr.size and (arr[0] > self.max_order or arr.max() > self.max_order):
            raise ParamError("plan", "orders out of range")
        return arr.astype(np.int64)

    def _check_target(self, target: Any) -> float:
        y = float(np.asarray(target, dtype=np.float64).reshape(()))
        if not math.isfinite(y):
            raise ParamError("target", "must be finite")
        if self._loss.classification and y not in (-1.0, 1.0):
            raise ParamError("target", f"must be -1 or +1 for loss {self.loss!r}, got {y}")
        return y

    def _pool(self, x: np.ndarray, plan: np.ndarray, copies: Any) -> np.ndarray:
        """The logged copy followed by the required feedback copies, validated."""
        arr = np.asarray(copies, dtype=np.float64)
        if arr.size == 0:
            arr = arr.reshape(0, self.n_features)
        if arr.ndim != 2 or arr.shape[1] != self.n_features:
            raise ParamError("copies", f"expected shape (k, {self.n_features}), got {arr.shape}")
        needed = self._needed(plan)
        if arr.shape[0] < needed:
            raise ParamError("copies", f"this round needs {needed} copies, got {arr.shape[0]} "
                             f"(more_copies: {needed - arr.shape[0]})")
        used = arr[:needed]
        if not np.all(np.isfinite(used)):
            raise ParamError("copies", "contains non-finite values")
        return np.vstack([x[None], used])


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ParamError(name, f"must be one of {list(choices)}, got {value!r}")
    return value
