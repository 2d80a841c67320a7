"""MC-SLP and MC-DBF: multiclass learning from dilute (label-set) feedback (P2 Algorithms 1-2).

The learner shows a set of ``m`` labels and learns whether the true label is
in it.  Follows P2 Algorithm 2 with three corrections of ours:

* ``tau1 = m (k-2)! / (k-m-1)!`` (a permutation count, not a power), kept as
  ``log tau1`` via log-gamma so it never overflows;
* ``tau2 = (m-1) / (k-m)``;
* the ordered draw without replacement uses the conditional
  ``P(b_i) / (1 - sum_{j<i} P(b_j))`` (the printed product form is wrong for
  ``i >= 3``), and ``Z`` is the probability of the *ordered* tuple, paired
  with the ordered count ``tau1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.learners.base import Decision, check_int, check_range
from app.learners.linear import LoggedOnlyLearner, Terms, check_click, check_label, own_input


def tau_constants(n_classes: int, m: int) -> tuple[float, float]:
    """``(log tau1, tau2)`` of MC-DBF (P2 Algorithm 2, ``tau1`` corrected).

    ``tau1 = m (k-2)P(m-1) = m (k-2)! / (k-m-1)!``, ``tau2 = (m-1)/(k-m)``.

    >>> log_tau1, tau2 = tau_constants(10, 3)
    >>> round(math.exp(log_tau1)), tau2 == 2 / 7
    (168, True)
    """
    k = n_classes
    return math.log(m) + math.lgamma(k - 1) - math.lgamma(k - m), (m - 1) / (k - m)


def top_m(scores: np.ndarray, m: int) -> np.ndarray:
    """The ``m`` highest-scoring labels in rank order, ties to the lower index."""
    return np.argsort(-scores, kind="stable")[:m]


def label_probabilities(greedy: np.ndarray, gamma: float, n_classes: int) -> np.ndarray:
    """Per-label ``P(r) = ((1 - gamma)/m) I[r in greedy] + gamma/k`` (P2 Algorithm 2)."""
    p = np.full(n_classes, gamma / n_classes)
    p[greedy] += (1.0 - gamma) / len(greedy)
    return p


def ordered_log_prob(played: Sequence[int] | np.ndarray, greedy: Sequence[int] | np.ndarray,
                     gamma: float,
                     n_classes: int) -> float:
    """``log Z``: log-probability of the ordered draw ``played`` (P2 Algorithm 2, ``Z(A)``).

    ``Z = prod_i P(b_i) / mass_i`` with ``mass_i`` the total ``P`` of the
    labels not drawn before step ``i``, summed explicitly from the counts of
    greedy and other labels left (no ``1 - sum`` cancellation).

    >>> round(math.exp(ordered_log_prob([0], [0], 0.1, 4)), 12)
    0.925
    """
    m, k = len(greedy), n_classes
    in_greedy = {int(g) for g in greedy}
    greedy_share, uniform_share = (1.0 - gamma) / m, gamma / k
    log_z, greedy_left = 0.0, m
    for i, b in enumerate(played):
        mass = greedy_share * greedy_left + uniform_share * (k - i)
        hit = int(b) in in_greedy
        log_z += math.log(greedy_share * hit + uniform_share) - math.log(mass)
        greedy_left -= hit
    return log_z


def ordered_draw(rng: np.random.Generator, greedy: np.ndarray, gamma: float, n_classes: int
                 ) -> tuple[np.ndarray, float]:
    """Draw ``m`` distinct labels in order, ``P(b_i | past) = P(b_i) / mass_i`` (P2 Prop. 10).

    Each step uses one uniform ``u`` on the mixture the conditional law is:
    with probability (uniform mass left) / (mass left) a uniform label among
    those left (in increasing order), else a uniform label among the greedy
    ones left (in rank order).  With ``m = 1`` this is exactly
    :func:`app.learners.linear.explore_draw`.  Returns the ordered labels and
    ``log Z``.
    """
    m, k = len(greedy), n_classes
    left = list(range(k))
    greedy_left = [int(g) for g in greedy]
    greedy_share, uniform_share = (1.0 - gamma) / m, gamma / k
    played = np.empty(m, dtype=np.int64)
    for i in range(m):
        uniform_mass = uniform_share * len(left)
        p_uniform = uniform_mass / (greedy_share * len(greedy_left) + uniform_mass)
        u = rng.random()
        if u < p_uniform:
            b = left[min(int(u / p_uniform * len(left)), len(left) - 1)]
        else:
            j = int((u - p_uniform) / (1.0 - p_uniform) * len(greedy_left))
            b = greedy_left[min(j, len(greedy_left) - 1)]
        left.remove(b)
        if b in greedy_left:
            greedy_left.remove(b)
        played[i] = b
    return played, ordered_log_prob(played, greedy, gamma, k)


class _TopMLearner(LoggedOnlyLearner):
    """Shared constructor of the label-set learners: a set size ``1 <= m <= k-1``."""

    task = "label_set"

    def __init__(self, *, n_features: int, n_classes: int | None, seed: int | None,
                 m: int) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed)
        self.m = check_int("m", m, 1, self.n_classes - 1)


class MCSLP(_TopMLearner):
    """Multiclass Set Learning Perceptron, full information (P2 Algorithm 1).

    Shows the top-``m`` set ``Yhat`` of ``W x`` and, given the true label ``y``,

        W <- W + x (e_y - (1/m) sum_{r in Yhat} e_r).

    With ``m = 1`` it is the multiclass Perceptron.  LO.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``k``.
    seed:
        Unused (no randomness).
    m:
        Set size, ``1 <= m <= k - 1``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = MCSLP(n_features=4, n_classes=4, m=2)
    >>> for _ in range(500):
    ...     y = int(rng.integers(4))
    ...     model.learn_one({**model.decide(np.eye(4)[y]).context, "label": y})
    >>> model.decide(np.eye(4)[3]).output["greedy_labels"][0]
    3
    """

    paper = (
        "Batra & Manwani, *Multiclass Classification using Dilute Bandit Feedback*, "
        "Algorithm 1 (MC-SLP)"
    )

    feedback_fields = ("label",)

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, m: int = 2) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed, m=m)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        xv = own_input(x, self.n_features)
        greedy = top_m(self.W_.dot(xv), self.m)
        labels = greedy.tolist()
        context: dict[str, Any] = {"x": xv, "greedy": greedy, "played": greedy.copy(),
                                  "log_prob": np.float64(0.0)}
        output: dict[str, Any] = {"labels": labels, "probability": 1.0, "greedy_labels": labels}
        return Decision(output=output, context=context)

    def terms(self, fields: Mapping[str, Any]) -> Terms:
        return Terms(check_label(fields["label"], self.n_classes), 1.0, fields["greedy"],
                     1.0 / self.m)


class MCDBF(_TopMLearner):
    """Multiclass classification with Dilute Bandit Feedback (P2 Algorithm 2).

    Shows an ordered draw ``b_1..b_m`` without replacement from
    ``P(r) = ((1-gamma)/m) I[r in Yhat] + gamma/k`` (``Yhat`` = top-``m`` of
    ``W x``) and, on the bit ``phi = I[y in {b_1..b_m}]``, applies

        U_r = x (phi I[r in Ytilde] / (Z tau1) - tau2 - I[r in Yhat] / m)

    to every row ``r``, with ``Z`` the ordered-draw probability (logged as
    ``log_prob``) and ``tau1, tau2`` from :func:`tau_constants`.  Its
    expectation is the MC-SLP update (P2 eq. (11), ``tau1`` corrected).  With ``m = 1`` it is the
    Banditron.  LO: a batch is one matrix product.

    Parameters
    ----------
    n_features, n_classes:
        Input dimension ``d`` and number of classes ``k``.
    seed:
        Seed of the draws.
    m:
        Set size, ``1 <= m <= k - 1``.
    gamma:
        Exploration rate in ``(0, 1]``.
    tau2_term:
        Apply the common ``-tau2 x`` shift to every row (default, needed for
        unbiasedness of ``W`` itself).  It never changes a prediction or a
        draw (all scores move by the same amount), only the norm of ``W``.

    Attributes
    ----------
    W_:
        ``(k, d)`` weights.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> model = MCDBF(n_features=4, n_classes=4, seed=2, m=2, gamma=0.3)
    >>> for _ in range(3000):
    ...     y = int(rng.integers(4)); ctx = model.decide(np.eye(4)[y]).context
    ...     model.learn_one({**ctx, "click": float(y in ctx["played"])})
    >>> [model.decide(np.eye(4)[c], explore=False).output["greedy_labels"][0] for c in range(4)]
    [0, 1, 2, 3]
    """

    paper = (
        "Batra & Manwani, *Multiclass Classification using Dilute Bandit Feedback*, "
        "Algorithm 2 (MC-DBF)"
    )

    feedback_fields = ("click",)

    def __init__(self, *, n_features: int, n_classes: int | None = None,
                 seed: int | None = None, m: int = 2, gamma: float = 0.1,
                 tau2_term: bool = True) -> None:
        super().__init__(n_features=n_features, n_classes=n_classes, seed=seed, m=m)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0, low_open=True)
        self.tau2_term = bool(tau2_term)
        self.log_tau1, self.tau2 = tau_constants(self.n_classes, self.m)

    def decide(self, x: np.ndarray, explore: bool = True) -> Decision:
        """Top-``m`` greedy set and, with ``explore``, the ordered exploration draw.

        Without exploration the greedy set is shown with probability 1 and
        the generator is not touched.
        """
        xv = own_input(x, self.n_features)
        greedy = top_m(self.W_.dot(xv), self.m)
        if explore:
            played, log_prob = ordered_draw(self._rng, greedy, self.gamma, self.n_classes)
        else:
            played, log_prob = greedy.copy(), 0.0
        context: dict[str, Any] = {"x": xv, "greedy": greedy, "played": played,
                                  "log_prob": np.float64(log_prob)}
        output: dict[str, Any] = {"labels": played.tolist(), "probability": math.exp(log_prob),
                                  "greedy_labels": greedy.tolist()}
        return Decision(output=output, context=context)

    def terms(self, fields: Mapping[str, Any]) -> Terms:
        phi = check_click(fields["click"])
        weight = phi * np.exp(-(fields["log_prob"] + self.log_tau1))
        return Terms(fields["played"], weight, fields["greedy"], 1.0 / self.m,
                     self.tau2 if self.tau2_term else 0.0)
