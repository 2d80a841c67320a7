"""UMA: the unconfused ultraconservative multiclass algorithm (P4, Algorithm 2).

UMA learns the linear classifier of the *true* classes from noisy class
labels, given the confusion matrix ``C`` of the noise (``C[p, q] = P(noisy p
| true q)``, see :mod:`app.learners.confusion`).  Instead of the examples
themselves, its ultraconservative updates use the points

    Gamma^p[k] = (1/n) sum_i I{y_i = k} I{x_i in A_p} x_i        (steps 5-6)
    z_pq       = [C^-1 Gamma^p]_q                                 (step 7)

where ``A_p = {x : <w_p, x> - <w_k, x> >= alpha for all k != p}`` is the
region the current model predicts as ``p``.  By Propositions 1-2, ``z_pq`` is
an unbiased estimate of ``E[I{t(X) = q} I{X in A_p} X]``: the mass of the
true-class-``q`` points that the model predicts as ``p`` (P4 Propositions 1-2;
the paper's sentence swaps ``p`` and ``q``, its formula does not).

The streaming form (P4 Section 3.4, with the settings that work in practice, see
``docs/results/uma.md``) buffers the noisy examples in a sliding window and
runs a few UMA iterations on the whole window every ``chunk`` new examples.

Kernels (P4 section 3.6): the paper projects the inputs onto ``D`` kernel-PCA
axes and runs UMA on the projections.  With ``kernel="gaussian:SIGMA2"``
UMA runs on ``D = n_components`` random Fourier features of the Gaussian
kernel ``exp(-||x - x'||^2 / sigma2)`` (Rahimi and Recht, 2007),
``phi(x) = sqrt(2/D) cos(Omega^T x + b)``, ``Omega ~ N(0, (2/sigma2) I)``,
``b ~ U[0, 2 pi)``, so that ``E <phi(x), phi(x')> = k(x, x')``; see
:func:`fourier_features`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from app.learners.base import (
    ITEM_BYTES,
    ConfusionReport,
    Decision,
    Event,
    Learner,
    ParamError,
    State,
    check_input,
    check_int,
    check_non_negative,
    check_range,
    check_state,
    size_param,
)
from app.learners.confusion import (
    COND_MAX,
    Orientation,
    count_gold,
    estimate_confusion,
    validate_confusion,
)
from app.learners.kernels.functions import parse_kernel
from app.learners.linear import own_input
from app.learners.perceptron import Perceptron

SELECTIONS = ("error", "conf", "random")
TAU_RULES = ("perceptron_pq", "max", "uniform")

#: Values of ``confusion_source_``.
SOURCE_IDENTITY, SOURCE_GIVEN, SOURCE_GOLD = 0, 1, 2
SOURCE_NAMES = ("identity", "given", "gold")

PI_MIN = 1e-12


def fourier_features(X: np.ndarray, omega: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """Random Fourier features ``phi(x) = sqrt(2/D) cos(Omega^T x + b)`` of the rows of ``X``.

    ``omega`` has shape ``(d, D)``, ``phase`` shape ``(D,)``.  With
    ``Omega ~ N(0, (2/sigma2) I)`` and ``b ~ U[0, 2 pi)``,
    ``E <phi(x), phi(x')> = exp(-||x - x'||^2 / sigma2)``.

    >>> rng = np.random.default_rng(0)
    >>> omega, phase = rng.standard_normal((2, 20000)), rng.uniform(0, 2 * np.pi, 20000)
    >>> phi = fourier_features(np.array([[0.0, 0.0], [0.6, 0.8]]), omega * np.sqrt(2.0), phase)
    >>> bool(abs(phi[0] @ phi[1] - np.exp(-1.0)) < 0.03)   # sigma2 = 1; s.d. about 0.005
    True
    """
    D = phase.shape[0]
    return np.asarray(np.sqrt(2.0 / D) * np.cos(X @ omega + phase))


def membership(scores: np.ndarray, alpha: float) -> np.ndarray:
    """``M[i, p]``: whether ``x_i`` lies in ``A_p^alpha`` (step 4), from the scores ``X W^T``.

    ``x_i`` is in ``A_p`` iff ``s_ip - max_{k != p} s_ik >= alpha``.  With
    ``alpha = 0`` a point tied between top classes belongs to all of them
    (at ``W = 0``, every point is in every ``A_p``).

    >>> membership(np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0]]), 0.0)
    array([[ True,  True, False],
           [False,  True, False]])
    """
    n, Q = scores.shape
    rows = np.arange(n)
    best = scores.argmax(axis=1)
    top1 = scores[rows, best]
    rest = scores.copy()
    rest[rows, best] = -np.inf
    other_max = np.repeat(top1[:, None], Q, axis=1)
    other_max[rows, best] = rest.max(axis=1)
    return np.asarray(scores - other_max >= alpha)


def update_points(X: np.ndarray, y: np.ndarray, W: np.ndarray, C: np.ndarray,
                  alpha: float) -> np.ndarray:
    """All update points at once: ``Z[p, q] = z_pq = [C^-1 Gamma^p]_q``, shape ``(Q, Q, d)``.

    ``Gamma^p[k] = (1/n) sum_i I{y_i = k} I{x_i in A_p^alpha} x_i`` (steps
    4-6), computed for every ``p`` with one matrix product; ``C^-1`` is
    applied with :func:`numpy.linalg.solve`, never formed.
    """
    n, d = X.shape
    Q = W.shape[0]
    M = membership(X @ W.T, alpha).astype(np.float64)
    gamma = np.zeros((Q, Q, d))                                    # gamma[p, k]
    for k in range(Q):
        rows = y == k
        gamma[:, k, :] = M[rows].T @ X[rows]
    gamma /= n
    rhs = gamma.transpose(1, 0, 2).reshape(Q, Q * d)               # rows k, per p
    return np.asarray(np.linalg.solve(C, rhs).reshape(Q, Q, d).transpose(1, 0, 2))


def class_proportions(y: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``pi_hat = (1/n) C^-1 ycount``: estimated true-class proportions (section 3.5), > 0."""
    Q = C.shape[0]
    counts = np.bincount(y, minlength=Q).astype(np.float64)
    pi = np.linalg.solve(C, counts) / max(len(y), 1)
    return np.asarray(np.maximum(pi, PI_MIN))


def uma_iteration(W: np.ndarray, X: np.ndarray, y: np.ndarray, C: np.ndarray, *,
                  alpha: float, selection: str, tau_rule: str, eps: float,
                  rng: np.random.Generator) -> tuple[int, int] | None:
    """One UMA iteration (steps 3-11) on ``(X, y)``; updates ``W`` in place.

    Candidates are the pairs ``p != q`` with ``||z_pq|| > eps`` and a
    non-empty error set ``E = {r != q : <w_r - w_q, z_pq> >= alpha}``; every
    selection strategy is restricted to them (P4 Section 3.5, restricted here), so the
    stopping rule is "no candidate left".  Step sizes: ``tau_q = +1`` and

    * ``perceptron_pq`` (the paper's experiments): ``tau_p = -1``, or
      ``tau_r* = -1`` with ``r* = argmax_{r in E} <w_r, z_pq>`` when
      ``p`` is not in ``E`` (keeps P4's constraint (6), which ``tau_p = -1`` breaks then);
    * ``max``: always ``tau_r* = -1``;
    * ``uniform``: ``tau_r = -1/|E|`` for ``r`` in ``E``.

    The steps sum to zero, so ``sum_q w_q = 0`` is preserved.  Returns the
    updated pair ``(p, q)``, or ``None`` when there is no candidate (converged).
    """
    Q = W.shape[0]
    Z = update_points(X, y, W, C, alpha)
    norms = np.linalg.norm(Z, axis=2)
    proj = Z @ W.T                                                  # proj[p, q, r] = <w_r, z_pq>
    own = proj[:, np.arange(Q), np.arange(Q)]                       # own[p, q] = <w_q, z_pq>
    in_error = proj - own[:, :, None] >= alpha
    in_error[:, np.arange(Q), np.arange(Q)] = False                 # r != q
    candidate = (norms > eps) & in_error.any(axis=2)
    candidate[np.arange(Q), np.arange(Q)] = False                   # p != q
    if not candidate.any():
        return None
    if selection == "random":
        options = np.argwhere(candidate)
        p, q = (int(v) for v in options[rng.integers(len(options))])
    else:
        score = norms if selection == "error" else norms / class_proportions(y, C)[None, :]
        p, q = (int(v) for v in np.unravel_index(
            np.argmax(np.where(candidate, score, -np.inf)), (Q, Q)))
    z = Z[p, q]
    errors = np.flatnonzero(in_error[p, q])
    tau = np.zeros(Q)
    if tau_rule == "uniform":
        tau[errors] = -1.0 / errors.size
    elif tau_rule == "perceptron_pq" and in_error[p, q, p]:
        tau[p] = -1.0
    else:
        tau[errors[np.argmax(proj[p, q, errors])]] = -1.0
    tau[q] = 1.0
    W += tau[:, None] * z[None, :]
    return p, q


class UMA(Learner):
    """Streaming UMA for the ``noisy_label`` task (P4 Algorithm 2, online in chunks).

    Every example ``(x, noisy label)`` enters a sliding window of the last
    ``window`` examples; every ``chunk`` new examples, :meth:`step` runs up
    to ``iterations`` UMA iterations (:func:`uma_iteration`) on the whole
    window.  Predictions are ``argmax_q <w_q, x>`` (lowest index on ties).
    With a ``kernel``, ``x`` is replaced by its random Fourier features
    ``phi(x)`` everywhere (updates and predictions); the window keeps the
    raw inputs and a step maps them.

    Gold examples (``gold = 1``) carry, besides the noisy label the noise
    source gave, the checked ``true_label``; their pair counts estimate
    ``C`` (P4 Section 4.2.1), refreshed at every step, unless the client set ``C``
    (constructor ``confusion`` or :meth:`set_confusion`).  Until every class
    has ``gold_min_per_class`` gold examples and the estimate passes
    :func:`~app.learners.confusion.validate_confusion`, ``C = I`` (UMA is then
    a batch Perceptron on the noisy labels).

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``Q``.
    seed:
        Seed of the generator used by ``selection="random"``.
    confusion:
        ``Q x Q`` confusion matrix, rows = noisy label, columns = true class;
        ``None`` (default): estimate it from gold examples.
    selection:
        Pair selection (section 3.5): ``"error"`` (``argmax ||z_pq||``,
        default), ``"conf"`` (``argmax ||z_pq|| / pi_hat_q``) or ``"random"``.
    alpha:
        Margin of ``A_p`` and of the error set.  The paper's experiments use
        0; with ``alpha > 0`` and ``W = 0`` no point is in any ``A_p`` and
        UMA never moves.
    tau_rule:
        Step sizes: ``"perceptron_pq"`` (default, the paper's), ``"max"``,
        ``"uniform"``.
    chunk:
        New examples between two steps.
    iterations:
        UMA iterations per step (fewer if no candidate pair is left).
    window:
        Number of most recent examples a step uses.
    eps_z:
        Stopping threshold on ``||z_pq||``, relative to the mean ``||x||``
        of the window.
    gold_min_per_class:
        Gold examples needed in every class before the estimated ``C`` is used.
    cond_max:
        Largest condition number accepted for ``C``.
    auto_step:
        Run :meth:`step` from :meth:`learn_one` when a chunk is complete;
        ``False`` leaves it to the caller, which checks :attr:`step_due`.
    kernel:
        ``None`` (default): linear UMA on ``x``.  ``"gaussian:SIGMA2"``: UMA
        on random Fourier features of ``exp(-||x - x'||^2 / sigma2)`` (the
        project's kernel syntax, :func:`~app.learners.kernels.functions.parse_kernel`;
        other kernels are refused).  Random features rather than a Nystroem
        map from the first examples: the map is fixed by the seed from the
        first decision on, has fixed shapes and needs no warm-up phase.
    n_components:
        Number ``D`` of random features (ignored without ``kernel``).

    Attributes
    ----------
    W_ : ndarray of shape (Q, d), or (Q, D) with a kernel
        Weight rows; they sum to 0.
    omega_, phase_ : ndarrays of shape (d, D) and (D,), only with a kernel
        The random Fourier map ``Omega``, ``b``, drawn once from ``seed``.
    confusion_ : ndarray of shape (Q, Q)
        The confusion matrix in use.
    confusion_source_ : 0-d int array
        0 identity (no matrix yet), 1 given by the client, 2 estimated from gold.
    gold_counts_ : ndarray of shape (Q, Q)
        ``N[p, q]``: gold examples with noisy label ``p`` and true class ``q``.

    Examples
    --------
    Three classes on the unit circle, labels flipped uniformly with
    probability 0.3 and the true ``C`` given:

    >>> from app.learners.confusion import validate_confusion
    >>> rng = np.random.default_rng(0)
    >>> angle = rng.uniform(0, 2 * np.pi, 3000)
    >>> X = np.c_[np.cos(angle), np.sin(angle)]
    >>> t = (X @ np.array([[1.0, 0.0], [-0.5, 0.87], [-0.5, -0.87]]).T).argmax(axis=1)
    >>> C = np.full((3, 3), 0.15) + 0.55 * np.eye(3)
    >>> y = np.array([rng.choice(3, p=C[:, k]) for k in t])
    >>> model = UMA(n_features=2, n_classes=3, confusion=C.tolist(), seed=0)
    >>> errors = 0
    >>> for x, label, truth in zip(X, y, t):
    ...     errors += model.decide(x).output["label"] != truth
    ...     model.learn_one({"x": x, "label": label, "gold": 0, "true_label": -1})
    >>> bool(errors / len(X) < 0.15), bool(np.allclose(model.W_.sum(axis=0), 0))
    (True, True)
    """

    paper = "Louche & Ralaivola, *Unconfused Ultraconservative Multiclass Algorithms*, Algorithm 2"

    task: ClassVar[str] = "noisy_label"
    feedback_fields: ClassVar[tuple[str, ...]] = ("label", "gold", "true_label")
    logged_only: ClassVar[bool] = False
    takes_confusion_matrix: ClassVar[bool] = True

    def __init__(
        self,
        *,
        n_features: int,
        n_classes: int,
        seed: int | None = None,
        confusion: Sequence[Sequence[float]] | None = None,
        selection: str = "error",
        alpha: float = 0.0,
        tau_rule: str = "perceptron_pq",
        chunk: int = 50,
        iterations: int = 3,
        window: int = 5000,
        eps_z: float = 1e-6,
        gold_min_per_class: int = 10,
        cond_max: float = COND_MAX,
        auto_step: bool = True,
        kernel: str | None = None,
        n_components: int = 200,
    ) -> None:
        self.n_features = check_int("n_features", n_features, 1)
        self.n_classes = check_int("n_classes", n_classes, 2)
        self.seed = seed
        if selection not in SELECTIONS:
            raise ParamError("selection", f"must be one of {SELECTIONS}, got {selection!r}")
        if tau_rule not in TAU_RULES:
            raise ParamError("tau_rule", f"must be one of {TAU_RULES}, got {tau_rule!r}")
        self.selection = selection
        self.tau_rule = tau_rule
        self.alpha = check_non_negative("alpha", alpha)
        self.chunk = check_int("chunk", chunk, 1)
        self.iterations = check_int("iterations", iterations, 1)
        self.window = check_int("window", window, 2)
        self.eps_z = check_non_negative("eps_z", eps_z)
        self.gold_min_per_class = check_int("gold_min_per_class", gold_min_per_class, 1)
        self.cond_max = check_range("cond_max", cond_max, 1.0, np.inf, high_open=True)
        self.auto_step = bool(auto_step)
        self.n_components = check_int("n_components", n_components, 1)
        self.kernel = kernel
        sigma2 = None
        if kernel is not None:
            spec = parse_kernel(kernel)
            if not spec.gaussian:
                raise ParamError("kernel", f"UMA supports 'gaussian:SIGMA2' only, got {kernel!r}")
            sigma2 = spec.sigma2
        self.confusion = confusion
        #: Why the last gold estimate of ``C`` was not used (``None`` if it was).
        self.confusion_warning: str | None = None
        self._rng = np.random.default_rng(seed)
        Q, d = self.n_classes, self.n_features
        self._state_names = self._STATE
        if sigma2 is not None:
            D = self.n_components
            self.omega_ = self._rng.standard_normal((d, D)) * np.sqrt(2.0 / sigma2)
            self.phase_ = self._rng.uniform(0.0, 2.0 * np.pi, D)
            self._state_names += ("omega_", "phase_")
        self.W_ = np.zeros((Q, self.n_components if sigma2 is not None else d))
        self.buffer_x_ = np.zeros((self.window, d))
        self.buffer_y_ = np.zeros(self.window, dtype=np.int64)
        self.seen_ = np.zeros((), dtype=np.int64)
        self.since_step_ = np.zeros((), dtype=np.int64)
        self.iterations_ = np.zeros((), dtype=np.int64)
        self.gold_counts_ = np.zeros((Q, Q))
        self.confusion_ = np.eye(Q)
        self.confusion_source_ = np.array(SOURCE_IDENTITY, dtype=np.int64)
        if confusion is not None:
            self.set_confusion(confusion)

    @classmethod
    def state_bytes(cls, n_features: int, n_classes: int | None,
                    params: Mapping[str, Any]) -> int:
        """``W_`` (``Q x d``, or ``Q x D`` with a kernel map of ``d x D + D``), the window
        (``window x (d + 1)``), the gold counts and confusion matrix (``Q^2`` each), 4 scalars."""
        q, d = n_classes or 0, n_features
        window = size_param(params, "window")
        mapped = size_param(params, "n_components") if params.get("kernel") is not None else 0
        weights = q * (mapped or d) + mapped * (d + 1)
        return ITEM_BYTES * (weights + window * (d + 1) + 2 * q * q + 4)

    # -- confusion matrix -------------------------------------------------------------------

    def set_confusion(self, matrix: np.ndarray | Sequence[Sequence[float]] | None,
                      orientation: Orientation = "noisy_by_true") -> None:
        """Use the client's confusion matrix (validated), or ``None`` to go back to gold estimates.

        Raises :class:`ParamError` (field ``confusion``) for a matrix that is
        not column-stochastic, singular or ill-conditioned; the model is then
        unchanged.
        """
        if matrix is None:
            self.confusion_ = np.eye(self.n_classes)
            self.confusion_source_ = np.array(SOURCE_IDENTITY, dtype=np.int64)
            self.refresh_confusion()
            return
        self.confusion_ = validate_confusion(matrix, self.n_classes, cond_max=self.cond_max,
                                             orientation=orientation)
        self.confusion_source_ = np.array(SOURCE_GIVEN, dtype=np.int64)

    def confusion_report(self) -> ConfusionReport:
        """``confusion_``, where it comes from and, while UMA uses the identity, why."""
        source = int(self.confusion_source_)
        message = None
        if source == SOURCE_IDENTITY:
            estimate = estimate_confusion(self.gold_counts_, self.gold_min_per_class)
            if estimate is None:
                message = (f"estimated from gold examples once every class has "
                           f"{self.gold_min_per_class} (fewest now: "
                           f"{int(self.gold_counts_.sum(axis=0).min())}); until then UMA uses "
                           "the identity")
            else:
                try:
                    validate_confusion(estimate, self.n_classes, cond_max=self.cond_max,
                                       field="gold estimate")
                    message = "gold examples suffice; the estimate is used from UMA's next step"
                except ParamError as exc:
                    message = str(exc)
        return ConfusionReport(matrix=self.confusion_.tolist(), configured=source == SOURCE_GIVEN,
                               n_gold=int(self.gold_counts_.sum()),
                               ready=source in (SOURCE_GIVEN, SOURCE_GOLD), message=message)

    @property
    def confusion_source(self) -> str:
        """Where ``confusion_`` comes from: ``"identity"``, ``"given"`` or ``"gold"``."""
        return SOURCE_NAMES[int(self.confusion_source_)]

    def refresh_confusion(self) -> bool:
        """Re-estimate ``C`` from the gold counts unless the client set it; True if it changed.

        An estimate that fails validation (singular, ill-conditioned) is not
        used; :attr:`confusion_warning` says why.
        """
        if int(self.confusion_source_) == SOURCE_GIVEN:
            return False
        estimate = estimate_confusion(self.gold_counts_, self.gold_min_per_class)
        if estimate is None:
            return False
        try:
            self.confusion_ = validate_confusion(estimate, self.n_classes,
                                                 cond_max=self.cond_max, field="gold estimate")
        except ParamError as exc:
            self.confusion_warning = str(exc)
            return False
        self.confusion_warning = None
        self.confusion_source_ = np.array(SOURCE_GOLD, dtype=np.int64)
        return True

    # -- learning ---------------------------------------------------------------------------

    def features(self, X: np.ndarray) -> np.ndarray:
        """The inputs UMA works on: the rows of ``X``, or their random Fourier features."""
        if self.kernel is None:
            return X
        return fourier_features(X, self.omega_, self.phase_)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Predict ``argmax_q <w_q, phi(x)>``; logs ``x`` (UMA needs nothing else)."""
        xv = own_input(x, self.n_features)
        label = int(np.argmax(self.W_ @ self.features(xv[None, :])[0]))
        return Decision(output={"label": label}, context={"x": xv})

    def _check_label(self, name: str, value: Any) -> int:
        label = int(value)
        if not 0 <= label < self.n_classes or label != value:
            raise ParamError(name, f"must be a class in 0..{self.n_classes - 1}, got {value!r}")
        return label

    def learn_one(self, event: Event) -> None:
        """Buffer ``(x, label)``; count a gold pair; run :meth:`step` when a chunk is complete.

        ``label`` is the noisy label.  ``gold`` (0/1, default 0) marks an
        example whose true class ``true_label`` was checked.
        """
        x = check_input(event["x"], self.n_features)
        label = self._check_label("label", event["label"])
        if bool(event.get("gold", 0)):
            count_gold(self.gold_counts_, label, self._check_label("true_label",
                                                                   event["true_label"]))
        slot = int(self.seen_) % self.window
        self.buffer_x_[slot] = x
        self.buffer_y_[slot] = label
        self.seen_ = self.seen_ + 1
        self.since_step_ = self.since_step_ + 1
        if self.auto_step and self.step_due:
            self.step()

    @property
    def step_due(self) -> bool:
        """Whether ``chunk`` examples arrived since the last :meth:`step`."""
        return int(self.since_step_) >= self.chunk

    def step(self) -> int:
        """Refresh ``C`` from gold, then run up to ``iterations`` UMA iterations on the window.

        Returns the number of updates made (fewer than ``iterations`` when no
        candidate pair is left).
        """
        self.refresh_confusion()
        self.since_step_ = np.zeros((), dtype=np.int64)
        n = min(int(self.seen_), self.window)
        if n == 0:
            return 0
        return self.fit_batch(self.buffer_x_[:n], self.buffer_y_[:n], self.iterations)

    def fit_batch(self, X: np.ndarray, y: np.ndarray, max_iter: int = 200) -> int:
        """Batch UMA (Algorithm 2) on ``(X, y)`` from the current ``W``, with the current ``C``.

        Stops when no candidate pair is left (P4 Algorithm 2) or after
        ``max_iter`` iterations; returns the number of updates.  ``X`` holds
        raw inputs (mapped by :meth:`features` with a kernel).
        """
        X = self.features(np.asarray(X, dtype=np.float64))
        y = np.asarray(y, dtype=np.int64)
        eps = self.eps_z * float(np.mean(np.linalg.norm(X, axis=1)))
        done = 0
        for _ in range(max_iter):
            if uma_iteration(self.W_, X, y, self.confusion_, alpha=self.alpha,
                             selection=self.selection, tau_rule=self.tau_rule, eps=eps,
                             rng=self._rng) is None:
                break
            done += 1
        self.iterations_ = self.iterations_ + done
        return done

    # -- state ------------------------------------------------------------------------------

    _STATE: ClassVar[tuple[str, ...]] = (
        "W_", "buffer_x_", "buffer_y_", "seen_", "since_step_", "iterations_", "gold_counts_",
        "confusion_", "confusion_source_")

    def get_state(self) -> State:
        """Copies of the weights, the window, the counters, the confusion matrix, the kernel map."""
        return {name: np.array(getattr(self, name), copy=True) for name in self._state_names}

    def set_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace everything :meth:`get_state` exports (shapes must match)."""
        checked = check_state(self.get_state(), state)
        for name, value in checked.items():
            setattr(self, name, value)


class NoisyLabelPerceptron(Perceptron):
    """The ``noisy_label`` baseline ``f_y`` of P4: the multiclass Perceptron on the noisy labels.

    Same learner as :class:`~app.learners.perceptron.Perceptron` (P1 eq. (2)),
    registered for the ``noisy_label`` task; it reads only ``label`` and
    ignores ``gold`` / ``true_label``.
    """

    paper = (
        "Louche & Ralaivola, *Unconfused Ultraconservative Multiclass Algorithms*, the "
        "Perceptron baseline on noisy labels"
    )

    task = "noisy_label"
