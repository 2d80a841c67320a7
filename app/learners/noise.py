"""NREst: estimate the click-noise rates rho0, rho1 from logged bandit data.

Algorithm 3 of the noisy bandit feedback paper (P1 Section 3, Theorem 5),
with the choices below where P1 is silent.  From a buffer ``S`` of logged
triples ``(x, played label l, noisy click f)`` a binary classifier learns

    q(x, l) = P(f = 1 | x, played = l) = (1 - rho1) P(y = l | x) + rho0 P(y != l | x)

(Theorem 5).  At a "perfect example" ``x*_l`` of class ``l`` (``P(y = l | x*_l)
= 1``) this gives ``q(x*_l, l) = 1 - rho1`` and ``q(x*_k, l) = rho0`` for
``k != l``.  The perfect example of class ``j`` is taken as the record at the
``percentile``-th nearest-rank position of ``q_j(i) = q(x_i, j)`` over *all*
records (the label input forced to ``j``), which is robust to outliers where
the arg-max of eq. (6) is not.

Choices of ours:

* the played label enters the network one-hot encoded;
* the default percentile is ``100 (1 - 1/(2K))``: each class owns about
  ``1/K`` of the records, so this point sits in the middle of the top class's
  share.  The paper's fixed 89 sits at the edge of a class when K = 9 or 10
  and overestimates rho1 (its SynSep run needed 94);
* ``1 - rho1_hat`` is the median over classes of ``a_j = q_j(i*_j)`` and
  ``rho0_hat`` the median over ordered class pairs ``l != k`` of
  ``b_lk = q_l(i*_k)``, both over the classes played at least once in ``S``;
* the result is clipped to ``[0, 1)`` and scaled down so that
  ``1 - rho0 - rho1 >= beta_min``; a failed estimate (fewer than two played
  classes, a single click value, non-finite output) keeps the previous rates.

The paper's "normalisation" step (rescale ``(rho0, 1 - rho0)`` and
``(rho1, 1 - rho1)`` to sum to one) is omitted: the complementary values come
from the f = 0 output of the same two-way softmax at the same points, so each
pair already sums to one and the step is the identity.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.learners.base import ParamError, check_int, check_range

logger = logging.getLogger(__name__)


class ClickModel(Protocol):
    """A calibrated binary classifier of the noisy click: what NREst needs."""

    def fit(self, U: np.ndarray, f: np.ndarray) -> ClickModel:
        """Fit ``P(f = 1 | u)`` on inputs ``U`` (n, p) and clicks ``f`` (n,) in {0, 1}."""

    def prob1(self, U: np.ndarray) -> np.ndarray:
        """``P(f = 1 | u)`` for every row of ``U``."""


class MLPClickModel:
    """Multilayer perceptron for ``P(f = 1 | x, played)`` (P1 Section 3.2).

    scikit-learn's :class:`~sklearn.neural_network.MLPClassifier` (ReLU
    hidden layers, cross-entropy loss, Adam).  A binary MLPClassifier has one
    logistic output unit, which is the paper's two-unit softmax with the
    difference of the two logits as its only free quantity.  It has neither
    AdaGrad nor dropout; its L2 penalty ``alpha`` regularises instead.

    Its built-in ``early_stopping`` scores the validation set by *accuracy*,
    which is nearly flat under click noise and says nothing about calibration
    (the percentile rule reads probabilities).  So training runs one epoch at
    a time (``partial_fit``) on 90% of the data and keeps the weights of the
    epoch with the lowest validation log-loss on the other 10% (P1 Section 4
    does not say how it uses its validation split), stopping after
    ``patience`` epochs without an improvement larger than ``tol`` or at
    ``max_epochs``.  The paper trains for 70 epochs with AdaGrad; with Adam
    the noisy-click loss bottoms out after 2-6 epochs on SynSep and digits,
    and only noise-free buffers keep improving slowly (the loss creeps
    towards 0), hence the cap of 20 that keeps a 20,000 x 400 buffer within
    a few seconds.  All randomness (split, initialisation, shuffling) comes
    from ``seed``.

    BLAS runs single-threaded inside ``fit`` and ``prob1``: on 128-row
    mini-batches a multi-threaded BLAS gains nothing, and on the shared
    2-core machine it made a 20,000 x 409 fit 3-8 times slower under load
    (16-27 s against 2-4 s); one thread also makes the sums, hence the
    estimates, reproducible bit for bit.

    Parameters
    ----------
    hidden:
        Hidden layer sizes (the paper uses 2 x 48 for SynSep, 2 x 128 for
        MNIST).
    alpha:
        L2 penalty.
    learning_rate:
        Adam's initial step.
    batch_size:
        Mini-batch size (the paper: 128).
    max_epochs, patience, tol:
        Epoch budget, and early stopping after ``patience`` epochs whose
        validation log-loss improved by less than ``tol``.
    validation_fraction:
        Share of the records held out for validation.
    standardise:
        Centre and scale every input column by the training part's mean and
        standard deviation (constant columns are only centred) before fitting
        and predicting.
    seed:
        Seed of all random draws.
    """

    def __init__(
        self,
        hidden: tuple[int, ...] = (48, 48),
        *,
        alpha: float = 1e-4,
        learning_rate: float = 1e-3,
        batch_size: int = 128,
        max_epochs: int = 20,
        patience: int = 4,
        tol: float = 1e-3,
        validation_fraction: float = 0.1,
        standardise: bool = False,
        seed: int = 0,
    ) -> None:
        for size in hidden:
            check_int("hidden", size, 1)
        self.hidden = tuple(hidden)
        self.alpha = check_range("alpha", alpha, 0.0, math.inf)
        self.learning_rate = check_range("learning_rate", learning_rate, 0.0, 1.0, low_open=True)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.max_epochs = check_int("max_epochs", max_epochs, 1)
        self.patience = check_int("patience", patience, 1)
        self.tol = check_range("tol", tol, 0.0, math.inf)
        self.validation_fraction = check_range(
            "validation_fraction", validation_fraction, 0.0, 0.5, low_open=True)
        self.standardise = standardise
        self.seed = seed
        self.epochs_: int = 0
        self.val_loss_: float = math.nan

    @classmethod
    def paper(cls, hidden: tuple[int, ...] = (48, 48), *, standardise: bool = False,
              seed: int = 0) -> MLPClickModel:
        """NREst's network trained as the paper trains it, as far as scikit-learn allows.

        P1 Section 4 (Experimentation) and Appendix B (Iris and SynSep): two dense
        ReLU layers of 48 units, cross-entropy loss, mini-batches of 128, 70
        epochs, dropout 0.3 (0.2 on the image data sets), 10% of the training
        set for validation, AdaGrad at 0.01.  Here: the same layers, loss,
        batch size and validation share; up to 70 epochs, keeping the epoch
        with the best validation log-loss and stopping after 10 epochs
        without improvement; L2 ``alpha = 0.01`` (100 times the default) in
        place of dropout, which scikit-learn lacks; Adam at its usual 0.001
        in place of AdaGrad.  The paper does not say whether it standardised
        the inputs; ``standardise`` chooses.  The paper's 90:10 train-test
        split only served its own reporting: NREst reads the rates off the
        whole buffer either way.  The percentile of the perfect examples is
        :func:`estimate_noise_rates`' own parameter, not the network's (the
        paper: 89, and 94 on SynSep).
        """
        return cls(hidden, alpha=1e-2, max_epochs=70, patience=10, tol=1e-4,
                   standardise=standardise, seed=seed)

    def fit(self, U: np.ndarray, f: np.ndarray) -> MLPClickModel:
        """Train on ``(U, f)``; keep the epoch with the lowest validation log-loss."""
        from sklearn.neural_network import MLPClassifier  # heavy import: only when used
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return self._fit(MLPClassifier, U, f)

    def _fit(self, mlp: type, U: np.ndarray, f: np.ndarray) -> MLPClickModel:
        rng = np.random.RandomState(self.seed)
        order = rng.permutation(len(f))
        n_val = max(1, round(self.validation_fraction * len(f)))
        val, train = order[:n_val], order[n_val:]
        self.mean_ = np.zeros(U.shape[1])
        self.scale_ = np.ones(U.shape[1])
        if self.standardise:
            self.mean_ = U[train].mean(axis=0)
            std = U[train].std(axis=0)
            self.scale_ = np.where(std > 0.0, std, 1.0)
        U = (U - self.mean_) / self.scale_
        self.net_ = mlp(
            hidden_layer_sizes=self.hidden, alpha=self.alpha,
            learning_rate_init=self.learning_rate, batch_size=self.batch_size,
            random_state=rng,  # a RandomState instance advances across epochs
        )
        classes = np.array([0, 1])
        best_loss, best, stale = math.inf, None, 0
        for epoch in range(1, self.max_epochs + 1):
            self.net_.partial_fit(U[train], f[train], classes=classes)
            loss = _log_loss(f[val], self.net_.predict_proba(U[val])[:, 1])
            if loss < best_loss:
                stale = 0 if loss < best_loss - self.tol else stale + 1
                best_loss, self.epochs_ = loss, epoch
                best = ([c.copy() for c in self.net_.coefs_],
                        [b.copy() for b in self.net_.intercepts_])
            else:
                stale += 1
            if stale >= self.patience:
                break
        assert best is not None  # the first epoch always improves on inf
        self.net_.coefs_, self.net_.intercepts_ = best
        self.val_loss_ = best_loss
        return self

    def prob1(self, U: np.ndarray) -> np.ndarray:
        """``P(f = 1 | u)`` per row, from the kept epoch's weights."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            proba: np.ndarray = self.net_.predict_proba((U - self.mean_) / self.scale_)[:, 1]
        return proba


def _log_loss(f: np.ndarray, p: np.ndarray) -> float:
    """Mean binary cross-entropy, probabilities clipped away from 0 and 1."""
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return float(-np.mean(f * np.log(p) + (1.0 - f) * np.log1p(-p)))


@dataclass(frozen=True)
class NoiseEstimate:
    """Result of one NREst run.

    Attributes
    ----------
    rho0, rho1:
        Sanitised estimates (the previous ones when ``ok`` is False).
    n_samples:
        Records in the buffer.
    percentile:
        Percentile used for the perfect examples.
    per_class_a:
        ``a_j = q_j(i*_j)``, estimates of ``1 - rho1`` (NaN for classes never
        played in the buffer).
    pairwise_b:
        ``b_lk = q_l(i*_k)`` at row ``l``, column ``k``, estimates of ``rho0``
        (NaN on the diagonal and for classes never played).
    raw_rho0, raw_rho1:
        Estimates before sanitising (NaN when ``ok`` is False).
    ok:
        False when the estimate failed and the previous rates were kept.
    reason:
        Why it failed, or why the result was clipped; empty otherwise.
    """

    rho0: float
    rho1: float
    n_samples: int
    percentile: float
    per_class_a: np.ndarray = field(repr=False)
    pairwise_b: np.ndarray = field(repr=False)
    raw_rho0: float = math.nan
    raw_rho1: float = math.nan
    ok: bool = True
    reason: str = ""


def default_percentile(n_classes: int) -> float:
    """``100 (1 - 1/(2K))``: the middle of the top class's share of the records."""
    return 100.0 * (1.0 - 1.0 / (2.0 * n_classes))


def nearest_rank(values: np.ndarray, percentile: float) -> int:
    """Index into ``values`` of the nearest-rank ``percentile``-th element.

    Sorting ascending, the element at 0-based position ``ceil(p/100 n) - 1``
    (P1 §4: a percentile for eq. (6)'s argmax); returns its index in the unsorted ``values``.

    >>> nearest_rank(np.array([0.3, 0.1, 0.9, 0.5]), 50.0)
    0
    >>> nearest_rank(np.array([0.3, 0.1, 0.9, 0.5]), 100.0)
    2
    """
    order = np.argsort(values, kind="stable")
    pos = min(max(math.ceil(percentile / 100.0 * len(values)) - 1, 0), len(values) - 1)
    return int(order[pos])


def sanitise(rho0: float, rho1: float, beta_min: float) -> tuple[float, float]:
    """Clip to ``[0, 1)`` and scale both down so that ``rho0 + rho1 <= 1 - beta_min``.

    >>> sanitise(0.5, 0.6, 0.1)
    (0.40909090909090906, 0.49090909090909085)
    >>> sanitise(-0.02, 0.3, 0.1)
    (0.0, 0.3)
    """
    top = math.nextafter(1.0, 0.0)
    r0 = min(max(rho0, 0.0), top)
    r1 = min(max(rho1, 0.0), top)
    total = r0 + r1
    if total > 1.0 - beta_min:
        scale = (1.0 - beta_min) / total
        r0, r1 = r0 * scale, r1 * scale
        while 1.0 - r0 - r1 < beta_min:  # rounding: the learner checks this exact test
            if r1 >= r0:
                r1 = math.nextafter(r1, 0.0)
            else:
                r0 = math.nextafter(r0, 0.0)
    return r0, r1


def encode_inputs(X: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """``concat(x, one_hot(label))`` per row: the network input (P1 Algorithm 3)."""
    U = np.zeros((len(X), X.shape[1] + n_classes))
    U[:, : X.shape[1]] = X
    U[np.arange(len(X)), X.shape[1] + labels] = 1.0
    return U


def estimate_noise_rates(
    X: np.ndarray,
    played: np.ndarray,
    clicks: np.ndarray,
    n_classes: int,
    *,
    percentile: float | None = None,
    hidden: tuple[int, ...] = (48, 48),
    seed: int = 0,
    previous: tuple[float, float] = (0.0, 0.0),
    beta_min: float = 0.1,
    model: ClickModel | None = None,
) -> NoiseEstimate:
    """Estimate ``(rho0, rho1)`` from logged ``(x, played, noisy click)`` records.

    NREst (P1 Algorithm 3, Theorem 5): fit ``q(x, l) = P(f = 1 | x, l)``, take
    for every class ``j`` the record ``i*_j`` at the nearest-rank
    ``percentile`` of ``q_j(i) = q(x_i, j)``, then

        1 - rho1_hat = median_j q_j(i*_j),   rho0_hat = median_{l != k} q_l(i*_k)

    and sanitise (see the module docstring).

    Parameters
    ----------
    X:
        Logged inputs, shape ``(n, d)``.
    played:
        Played labels in ``0..n_classes-1``, shape ``(n,)``.
    clicks:
        Noisy clicks in {0, 1}, shape ``(n,)``.
    n_classes:
        Number of classes K.
    percentile:
        Percentile of the perfect examples, in (0, 100]; default
        ``100 (1 - 1/(2K))``.
    hidden:
        Hidden layer sizes of the default :class:`MLPClickModel`.
    seed:
        Seed of the default model.
    previous:
        Rates returned when the estimate fails.
    beta_min:
        Floor on ``1 - rho0 - rho1``, in (0, 1).
    model:
        Any :class:`ClickModel`; default ``MLPClickModel(hidden, seed=seed)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 3000)
    >>> X = np.eye(3)[y] + 0.1 * rng.standard_normal((3000, 3))
    >>> played = rng.integers(0, 3, 3000)
    >>> true_click = (played == y).astype(float)
    >>> flip = rng.random(3000) < np.where(true_click == 1, 0.3, 0.1)
    >>> est = estimate_noise_rates(X, played, np.abs(true_click - flip), 3, hidden=(32, 32))
    >>> bool(abs(est.rho0 - 0.1) < 0.05 and abs(est.rho1 - 0.3) < 0.05)
    True
    """
    K = check_int("n_classes", n_classes, 2)
    pi = default_percentile(K) if percentile is None else check_range(
        "percentile", percentile, 0.0, 100.0, low_open=True)
    beta_min = check_range("beta_min", beta_min, 0.0, 1.0, low_open=True, high_open=True)
    X = np.asarray(X, dtype=np.float64)
    played = np.asarray(played)
    clicks = np.asarray(clicks, dtype=np.float64)
    n = len(X)
    if X.ndim != 2 or played.shape != (n,) or clicks.shape != (n,):
        raise ParamError("buffer", f"shapes disagree: X {X.shape}, played {played.shape}, "
                                   f"clicks {clicks.shape}")
    if n and (played.min() < 0 or played.max() >= K):
        raise ParamError("played", f"labels must lie in [0, {K - 1}]")
    if not np.all((clicks == 0) | (clicks == 1)):
        raise ParamError("clicks", "must be 0 or 1")

    nan_a = np.full(K, math.nan)
    nan_b = np.full((K, K), math.nan)

    def failed(reason: str) -> NoiseEstimate:
        logger.warning("NREst kept the previous rates %s: %s", previous, reason)
        return NoiseEstimate(previous[0], previous[1], n, pi, nan_a, nan_b, ok=False,
                             reason=reason)

    present = np.flatnonzero(np.bincount(played.astype(np.int64), minlength=K))
    if len(present) < 2:
        return failed(f"{len(present)} class(es) played in the buffer, need 2")
    if clicks.min() == clicks.max():
        return failed("all clicks have the same value")
    if not np.all(np.isfinite(X)):
        return failed("non-finite inputs")

    net = model if model is not None else MLPClickModel(hidden, seed=seed)
    try:
        net.fit(encode_inputs(X, played.astype(np.int64), K), clicks)
    except ValueError as exc:  # e.g. scikit-learn's "non-finite parameter weights"
        return failed(f"training failed: {exc}")
    # q[j, i] = q(x_i, j): every record scored with its label input forced to j.
    q = np.stack([net.prob1(encode_inputs(X, np.full(n, j), K)) for j in range(K)])
    if not np.all(np.isfinite(q)):
        return failed("the click model produced non-finite probabilities")

    star = {j: nearest_rank(q[j], pi) for j in present}
    a = nan_a.copy()
    b = nan_b.copy()
    for j in present:
        a[j] = q[j, star[j]]
        for k in present:
            if k != j:
                b[j, k] = q[j, star[k]]
    raw_rho1 = 1.0 - float(np.nanmedian(a))
    raw_rho0 = float(np.nanmedian(b))
    rho0, rho1 = sanitise(raw_rho0, raw_rho1, beta_min)
    reason = "" if (rho0, rho1) == (raw_rho0, raw_rho1) else "clipped"
    return NoiseEstimate(rho0, rho1, n, pi, a, b, raw_rho0, raw_rho1, reason=reason)
