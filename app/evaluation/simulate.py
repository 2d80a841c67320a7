"""Simulated logs whose target policies' values are known exactly, label and slate.

Both worlds have a small finite set of contexts drawn uniformly, so a
policy's value is an exact finite sum; ``tests/evaluation`` and
``bench/results_evaluation.py`` check the estimators against it.

* **Label.**  :data:`N_CONTEXTS` contexts of :data:`DIM` features, :data:`K`
  actions, ``P(click | c, a) = CLICK[c, a]`` (a logistic model).  A policy
  is an ``N_CONTEXTS x K`` matrix and its value is
  ``(1/M) sum_c sum_a pi(a | c) CLICK[c, a]`` (:func:`label_value`).
* **Slate (cascade).**  A user reads a slate of :data:`SLOTS` distinct
  items of :data:`ITEMS` top down and clicks the first that attracts them
  (``ATTRACT[c, item]``), then stops, so a slot's reward depends on the
  items above it.  Slates are drawn by Plackett-Luce policies (items drawn
  one slot at a time without replacement, in proportion to ``exp(score)``;
  zero scores are the uniform policy), so a policy's value
  ``E[1 - prod_k (1 - ATTRACT[c, a_k])]`` is computed exactly by enumerating
  the slates (:func:`slate_value`).

Observed clicks go through click noise: a true click is lost with
probability ``rho1``, a spurious one appears with probability ``rho0`` (per
slot for slates).
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

from app.evaluation.estimators import LabelLog

N_CONTEXTS, DIM, K = 20, 5, 4
_LABEL_WORLD = np.random.default_rng(12345)
CONTEXTS = _LABEL_WORLD.normal(size=(N_CONTEXTS, DIM))
CLICK = 1.0 / (1.0 + np.exp(-(CONTEXTS @ _LABEL_WORLD.normal(size=(DIM, K)))))
"""``P(click | context c, action a)``, ``N_CONTEXTS x K``."""
SCORES = CONTEXTS @ _LABEL_WORLD.normal(size=(DIM, K)) * 0.7
SOFTMAX = np.exp(SCORES) / np.exp(SCORES).sum(axis=1, keepdims=True)
"""A model-based logging policy: softmax of scores unrelated to the clicks."""
_LEARNED_LOGITS = 3.0 * np.log(CLICK / (1.0 - CLICK))
LEARNED = np.exp(_LEARNED_LOGITS) / np.exp(_LEARNED_LOGITS).sum(axis=1, keepdims=True)
"""A target that has learned the click model: softmax of three times the click logits."""
LABEL_LOGGING: dict[str, np.ndarray] = {
    "uniform": np.full((N_CONTEXTS, K), 1.0 / K),
    "softmax": SOFTMAX,
}

N_SLATE_CONTEXTS, ITEMS, SLOTS = 10, 5, 3
_SLATE_WORLD = np.random.default_rng(2024)
ATTRACT = _SLATE_WORLD.uniform(0.05, 0.6, size=(N_SLATE_CONTEXTS, ITEMS))
PL_LOGGING_SCORES = _SLATE_WORLD.normal(size=(N_SLATE_CONTEXTS, ITEMS)) * 0.8
"""A model-based (Plackett-Luce) slate logging policy's scores."""
PL_TARGET_SCORES = 3 * np.log(ATTRACT)
"""A target that has learned the attractions: items drawn in proportion to their cube."""
UNIFORM_SCORES = np.zeros((N_SLATE_CONTEXTS, ITEMS))
"""Plackett-Luce with equal scores: distinct items drawn uniformly."""
ALL_SLATES = np.array(list(permutations(range(ITEMS), SLOTS)))


def noisy(clicks: np.ndarray, rng: np.random.Generator, rho0: float, rho1: float
          ) -> np.ndarray:
    """The observed clicks (floats): each true click lost with probability ``rho1``, each
    non-click turned into a click with probability ``rho0``."""
    seen = np.where(clicks, rng.random(clicks.shape) >= rho1, rng.random(clicks.shape) < rho0)
    return seen.astype(float)


def simulate_label(seed: int, logging: np.ndarray, events: int, rho0: float = 0.0,
                   rho1: float = 0.0, known_logging: bool = True
                   ) -> tuple[LabelLog, np.ndarray]:
    """A label log of ``events`` events drawn by the ``N_CONTEXTS x K`` ``logging`` policy,
    and each event's context index."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, N_CONTEXTS, events)
    mu = logging[c]
    a = (rng.random(events)[:, None] > np.cumsum(mu, axis=1)).sum(axis=1)
    click = rng.random(events) < CLICK[c, a]
    log = LabelLog(X=CONTEXTS[c], actions=a, propensities=mu[np.arange(events), a],
                   rewards=noisy(click, rng, rho0, rho1), n_actions=K,
                   logging=mu if known_logging else None)
    return log, c


def label_value(pi: np.ndarray) -> float:
    """The exact value of the ``N_CONTEXTS x K`` policy ``pi`` (contexts uniform)."""
    return float((pi * CLICK).sum(axis=1).mean())


def cascade_probabilities(scores: np.ndarray, slates: np.ndarray) -> np.ndarray:
    """``P(a_0 .. a_k | c)`` of each (score row, slate row) under Plackett-Luce, ``n x L``."""
    weights = np.exp(scores)
    left = weights.sum(axis=1)
    out = np.empty(slates.shape)
    running = np.ones(len(slates))
    for k in range(slates.shape[1]):
        chosen = weights[np.arange(len(slates)), slates[:, k]]
        running = running * chosen / left
        out[:, k] = running
        left = left - chosen
    return out


def slate_probabilities(scores: np.ndarray) -> np.ndarray:
    """``N_SLATE_CONTEXTS x len(ALL_SLATES)``: each slate's probability in each context."""
    return np.stack([cascade_probabilities(np.tile(row, (len(ALL_SLATES), 1)),
                                           ALL_SLATES)[:, -1] for row in scores])


def slot_clicks(c: int) -> np.ndarray:
    """``len(ALL_SLATES) x SLOTS``: the probability of a click at each slot of each slate in
    context ``c`` (attracted there, not above)."""
    attract = ATTRACT[c][ALL_SLATES]
    above = np.cumprod(np.hstack([np.ones((len(ALL_SLATES), 1)), 1.0 - attract[:, :-1]]),
                       axis=1)
    clicks: np.ndarray = attract * above
    return clicks


def slate_value(scores: np.ndarray) -> float:
    """Exact value (expected clicks per slate) of a Plackett-Luce policy, contexts uniform."""
    p = slate_probabilities(scores)
    return float(np.mean([p[c] @ slot_clicks(c).sum(axis=1)
                          for c in range(N_SLATE_CONTEXTS)]))


def simulate_slates(seed: int, scores: np.ndarray, slates_per_log: int, rho0: float = 0.0,
                    rho1: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A slate log drawn by the Plackett-Luce policy of ``scores``: observed clicks, the
    logging cascade propensities, the slates and their contexts."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, N_SLATE_CONTEXTS, slates_per_log)
    gumbel = scores[c] + rng.gumbel(size=(slates_per_log, ITEMS))
    slates = np.argsort(-gumbel, axis=1)[:, :SLOTS]  # Gumbel top-k: a Plackett-Luce draw
    attracted = rng.random((slates_per_log, SLOTS)) < ATTRACT[c[:, None], slates]
    first = np.where(attracted.any(axis=1), attracted.argmax(axis=1), SLOTS)
    clicks = np.arange(SLOTS)[None, :] == first[:, None]
    return (noisy(clicks, rng, rho0, rho1), cascade_probabilities(scores[c], slates),
            slates, c)


def slot_marginals(scores: np.ndarray) -> np.ndarray:
    """``N_SLATE_CONTEXTS x SLOTS x ITEMS``: each item's probability at each slot."""
    p = slate_probabilities(scores)
    return np.stack([np.stack([np.bincount(ALL_SLATES[:, k], weights=p[c], minlength=ITEMS)
                               for k in range(SLOTS)]) for c in range(N_SLATE_CONTEXTS)])


def independent_weights(slates: np.ndarray, c: np.ndarray, logging_scores: np.ndarray,
                        target_scores: np.ndarray) -> np.ndarray:
    """Per-slot independent IPS weights, ``n x SLOTS``: the exact item-at-slot marginal of
    the target over that of the logging policy (ignoring the items above the slot)."""
    logged, target = slot_marginals(logging_scores), slot_marginals(target_scores)
    k = np.arange(SLOTS)[None, :]
    weights: np.ndarray = target[c[:, None], k, slates] / logged[c[:, None], k, slates]
    return weights


def independent_ips_expectation(logging_scores: np.ndarray, target_scores: np.ndarray
                                ) -> float:
    """The exact expectation of per-slot independent IPS on logs of ``logging_scores``: the
    target's value only when a slot's click ignores the items above it."""
    logged = slate_probabilities(logging_scores)
    total = 0.0
    for c in range(N_SLATE_CONTEXTS):
        w = independent_weights(ALL_SLATES, np.full(len(ALL_SLATES), c), logging_scores,
                                target_scores)
        total += float(logged[c] @ (w * slot_clicks(c)).sum(axis=1))
    return total / N_SLATE_CONTEXTS
