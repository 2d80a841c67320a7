"""Label-task worlds whose click-noise truth is known, and the anchor rows the service logs.

A world gives each ``(input, label)`` a true relevance ``p`` (the probability
the label is right for that input); a played label's true click is 1 with
probability ``p`` and is flipped with rates ``(rho0, rho1)``
(:func:`app.sim.feedback.noisy_clicks`).  The anchor estimator
(:mod:`app.learners.noise_anchor`) assumes every input has exactly one right
label and that the scorer's most confident plays are right; these worlds hold
that assumption or break it:

* :func:`one_right`: the right label is ``argmax W x`` (the truth suite's
  stream: the assumption holds);
* :func:`graded`: three labels right with probability about 0.2, 0.45 and 0.7
  (a base rate each, moved by at most ``amplitude`` by the input): no label is
  surely right;
* :func:`best_half`: the labels ranked by ``W x`` are right with probability
  0.5, 0.35, 0.2 and 0.05: the best label clicks at ``rho0 + beta / 2``;
* :func:`context_graded`: relevance ``sigmoid(scale W x + b)``, graded and
  context-dependent.

Inputs are uniform on the unit sphere; the graded worlds also carry a
constant feature 1 (a base rate a linear model can learn).  :func:`label_plays`
runs the service's pipeline in process: ``linucb_diag`` at its defaults decides
batches, learns them, and the trainer's shadow
:class:`~app.learners.noise_anchor.ProgressiveScorer` scores each batch before
learning it; the result is the ``(prob, score, click)`` rows the jobs role
estimates from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.learners.noise_anchor import ProgressiveScorer
from app.learners.ridge import LinUCBDiag
from app.sim.feedback import noisy_clicks

Relevance = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class World:
    """A label world: ``K`` labels, ``d`` features (``constant``: the first is 1), and a
    factory of its relevance function from a generator."""

    n_classes: int
    n_features: int
    make: Callable[[np.random.Generator], Relevance]
    constant: bool = False

    def inputs(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` inputs uniform on the unit sphere (the first feature 1 when ``constant``)."""
        X = rng.standard_normal((n, self.n_features))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        if self.constant:
            X[:, 0] = 1.0
        return X


def one_right(n_classes: int = 10, n_features: int = 20) -> World:
    """Exactly one right label per input, ``argmax W x`` (``W`` standard normal)."""
    def make(rng: np.random.Generator) -> Relevance:
        W = rng.standard_normal((n_classes, n_features))

        def relevance(X: np.ndarray) -> np.ndarray:
            P = np.zeros((X.shape[0], n_classes))
            P[np.arange(X.shape[0]), np.argmax(X @ W.T, axis=1)] = 1.0
            return P
        return relevance
    return World(n_classes, n_features, make)


def graded(base: tuple[float, ...] = (0.2, 0.45, 0.7), n_features: int = 5,
           amplitude: float = 0.1) -> World:
    """Label ``a`` right with probability ``base[a] + amplitude u_a . x`` (``u_a`` unit)."""
    k = len(base)

    def make(rng: np.random.Generator) -> Relevance:
        U = rng.standard_normal((k, n_features))
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        b = np.array(base)

        def relevance(X: np.ndarray) -> np.ndarray:
            return np.asarray(np.clip(b + amplitude * X @ U.T, 0.0, 1.0))
        return relevance
    return World(k, n_features, make, constant=True)


def best_half(levels: tuple[float, ...] = (0.5, 0.35, 0.2, 0.05), n_features: int = 5
              ) -> World:
    """The labels ranked by ``W x`` are right with probabilities ``levels`` (best first)."""
    k = len(levels)

    def make(rng: np.random.Generator) -> Relevance:
        W = rng.standard_normal((k, n_features))
        lv = np.array(levels)

        def relevance(X: np.ndarray) -> np.ndarray:
            order = np.argsort(-(X @ W.T), axis=1)
            P = np.empty((X.shape[0], k))
            P[np.arange(X.shape[0])[:, None], order] = lv
            return P
        return relevance
    return World(k, n_features, make, constant=True)


def context_graded(n_classes: int = 5, n_features: int = 5, scale: float = 3.0) -> World:
    """Label ``a`` right with probability ``sigmoid(scale w_a . x + b_a)``."""
    def make(rng: np.random.Generator) -> Relevance:
        W = rng.standard_normal((n_classes, n_features))
        b = rng.normal(0.0, 0.5, n_classes)

        def relevance(X: np.ndarray) -> np.ndarray:
            return np.asarray(1.0 / (1.0 + np.exp(-(scale * X @ W.T + b))))
        return relevance
    return World(n_classes, n_features, make, constant=True)


@dataclass(frozen=True)
class Plays:
    """The logged plays of :func:`label_plays`, in the order made."""

    prob: np.ndarray
    score: np.ndarray
    click: np.ndarray
    relevance: np.ndarray
    """True relevance of each played label."""
    explored_score: np.ndarray | None = None
    """With ``explored_scorer``: the predicted click rate of each explored play's label by a
    ridge regression fitted on the explored plays alone, before it learned the play (NaN for
    the other plays and before ``20 K`` explored plays were learned); None without."""


def label_plays(world: World, n: int, rates: tuple[float, float], seed: int,
                batch: int = 500, explored_scorer: bool = False) -> Plays:
    """``n`` plays of ``linucb_diag`` at its defaults in ``world``, clicked through the noise
    ``rates``, as the service logs them (module docstring): batches of ``batch``
    decisions, each learned, then scored and learned by the shadow scorer.
    ``explored_scorer`` adds :attr:`Plays.explored_score` (the service logs no such
    score; ``bench/bench_noise_graded_checks.py`` measures what it would change): the
    explored plays (propensity at most ``1 / K``) are uniform draws, so their labels do not
    depend on the input and a regression on them alone is not bent by the policy's choices.

    >>> plays = label_plays(one_right(3, 4), 1_000, (0.1, 0.2), seed=0)
    >>> plays.prob.shape, bool(np.isnan(plays.score[:1000]).all())
    ((1000,), True)
    >>> more = label_plays(one_right(3, 4), 1_000, (0.1, 0.2), seed=0, explored_scorer=True)
    >>> bool(np.array_equal(more.click, plays.click)), more.explored_score.shape
    (True, (1000,))
    >>> bool(np.isnan(more.explored_score[more.prob > 1 / 3]).all())
    True
    """
    rng = np.random.default_rng(seed)
    relevance = world.make(rng)
    learner = LinUCBDiag(n_features=world.n_features, n_classes=world.n_classes, seed=seed)
    scorer = ProgressiveScorer(world.n_features, world.n_classes)
    explored_model = LinUCBDiag(n_features=world.n_features, n_classes=world.n_classes)
    cols: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "click": [], "relevance": [],
                                         "explored_score": []}
    for start in range(0, n, batch):
        X = world.inputs(rng, min(batch, n - start))
        rows = np.arange(X.shape[0])
        decisions = learner.decide_many(X)
        played = np.array([int(d.context["played"]) for d in decisions])
        prob = np.array([float(d.context["prob"]) for d in decisions])
        p = relevance(X)[rows, played]
        click = noisy_clicks((rng.random(X.shape[0]) < p).astype(float), *rates, rng)
        learner.learn_many({"x": X, "played": played, "click": click, "prob": prob,
                            "greedy": played})
        score = scorer.score_and_learn(X, played, click)
        if explored_scorer:
            cols["explored_score"].append(_explored_score(explored_model, X, played, click, prob))
        for name, values in (("prob", prob), ("score", score), ("click", click),
                             ("relevance", p)):
            cols[name].append(values)
    explored = cols.pop("explored_score")
    return Plays(**{k: np.concatenate(v) for k, v in cols.items()},
                 explored_score=np.concatenate(explored) if explored else None)


def _explored_score(model: LinUCBDiag, X: np.ndarray, played: np.ndarray, click: np.ndarray,
                    prob: np.ndarray) -> np.ndarray:
    """:attr:`Plays.explored_score` of one batch, then ``model`` learns its explored plays."""
    explored = prob <= (1.0 + 1e-9) / model.n_classes
    score = np.full(X.shape[0], np.nan)
    if model.count_ >= 20 * model.n_classes:
        score[explored] = (X[explored] @ model.weights_.T)[np.arange(explored.sum()),
                                                            played[explored]]
    if explored.any():
        model.learn_many({"x": X[explored], "played": played[explored],
                          "click": click[explored]})
    return score
