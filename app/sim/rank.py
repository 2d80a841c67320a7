"""A simulated recommender stream for the ``rank`` task: users, a churning catalogue, slates.

Each request draws a user ``x = [1, z]`` (``z ~ N(0, I / d_z)``, so
``||x||^2 ~ 2``) and ``n_candidates`` distinct items of the catalogue, each
with features ``a ~ N(0, I / d_a)``.  The true relevance is logistic in a
bilinear form,

    gamma(x, a) = sigmoid(x^T M a + bias),   M ~ N(0, scale^2),

so a linear model of ``x a^T`` ranks well but is not exactly right.  Clicks
follow the position-based model with click noise: the item in slot ``k`` is
examined with probability ``theta_k``, the true click is examination times a
Bernoulli(``gamma``) relevance draw, and the observed click is that bit
flipped with ``rho0`` (0 -> 1) and ``rho1`` (1 -> 0), as
:func:`app.sim.feedback.noisy_clicks` does for the ``label`` task.  Every
``churn_every`` requests a ``churn`` share of the catalogue is replaced by
new items (new ids, new features).

Trust bias (``trust``, Agarwal et al. WWW 2019): given one click-noise rate
per slot, the click model becomes ``P(click) = theta_k (R (1 - rho1) + (1 - R)
rho0_k)`` with ``R ~ Bernoulli(gamma)``: nothing is clicked unexamined, and an
irrelevant examined item is clicked with a probability ``rho0_k`` that depends
on its slot.  ``binary=True`` makes relevance a function of the features,
``gamma = 1[x^T M a + bias > 0]``.  A :class:`~app.sim.drift.Drift` moves the
relevance matrix to a second one drawn alike (:func:`~app.sim.drift.rotated`:
``abrupt`` and ``gradual`` rotate all of ``M``, ``churn`` one context
feature's row of ``M`` per period).

A fixed query pool (``queries``): ``queries`` contexts drawn once, each with
its own ``n_candidates`` items of the catalogue, fixed too; each request is one
of them, drawn uniformly, and the catalogue does not churn.  The same (query,
item) pair is then ranked many times, at whichever slots the policy's
randomisation puts it: the data intervention harvesting (Agarwal et al. WSDM
2019) needs.  :attr:`Request.query` is the query's index (without a pool, the
request's own index: every context is new).

The value of a ranking is ``sum_k theta_k gamma(x, a_k)`` (expected true
clicks, weighted by the true position bias); :meth:`RankSimulator.values`
gives it for a ranking together with that of the oracle (candidates sorted
by ``gamma``) and of a uniformly random ranking (``mean gamma * sum theta``),
the terms of the "share of the random-to-oracle gap closed" metric
(:func:`gap_closed`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sim.drift import Drift, rotated
from app.sim.feedback import noisy_clicks

#: The issue's setting: 10% churn per 1,000 requests, 20 candidates, 3 slots.
DEFAULT_THETA = (1.0, 0.6, 0.35)
DEFAULT_RHO = (0.03, 0.3)


@dataclass(frozen=True)
class Request:
    """One request: the user's context, the candidates' ids and features, their relevance."""

    query: int
    """The query (context) id: its index in the fixed pool, else the request's index."""
    x: np.ndarray
    ids: np.ndarray
    actions: np.ndarray
    relevance: np.ndarray
    """True ``gamma(x, a)`` per candidate (hidden from the learner)."""
    new: np.ndarray
    """Per candidate: whether the item is a candidate for the first time since it joined
    the catalogue (items of the initial catalogue count as new until first drawn too)."""


class RankSimulator:
    """Stream of ranking requests with a churning catalogue (module docstring).

    Parameters: context and action dimensions (``n_features`` includes the
    constant 1), catalogue size, candidates per request, slots, churn share
    and period, true position bias ``theta`` (one per slot, relative to slot
    0), click noise ``rho0``/``rho1``, the scale of ``M`` and the logit bias; ``trust``
    (one ``rho0_k`` per slot: the trust-bias click model), ``binary`` relevance and
    ``queries`` (a fixed pool of that many queries, no churn: module docstring).
    """

    def __init__(self, *, n_features: int = 8, n_action_features: int = 8,
                 n_items: int = 1_000, n_candidates: int = 20, slots: int = 3,
                 churn: float = 0.1, churn_every: int = 1_000,
                 theta: tuple[float, ...] = DEFAULT_THETA, rho0: float = DEFAULT_RHO[0],
                 rho1: float = DEFAULT_RHO[1], scale: float = 2.0, bias: float = -1.0,
                 seed: int = 0, drift: Drift | None = None,
                 trust: tuple[float, ...] | None = None, binary: bool = False,
                 queries: int | None = None) -> None:
        if n_features < 2 or n_action_features < 1:
            raise ValueError("n_features must be >= 2 (it includes the constant) and "
                             "n_action_features >= 1")
        if not 1 <= slots <= n_candidates <= n_items:
            raise ValueError("need 1 <= slots <= n_candidates <= n_items")
        if len(theta) != slots or not all(0.0 < t <= 1.0 for t in theta):
            raise ValueError(f"theta must give {slots} values in (0, 1]")
        if trust is not None and (len(trust) != slots or not all(0.0 <= r < 1.0 for r in trust)):
            raise ValueError(f"trust must give {slots} rates in [0, 1)")
        if not 0.0 <= churn <= 1.0 or churn_every < 1:
            raise ValueError("churn must lie in [0, 1] and churn_every be >= 1")
        if queries is not None and queries < 1:
            raise ValueError("queries must be >= 1 (or None: a new context per request)")
        self.n_features, self.n_action_features = n_features, n_action_features
        self.n_candidates, self.slots = n_candidates, slots
        self.churn, self.churn_every = churn, churn_every
        self.theta = np.array(theta, dtype=np.float64)
        self.rho0, self.rho1, self.bias = rho0, rho1, bias
        self.trust = None if trust is None else np.array(trust, dtype=np.float64)
        self.binary = binary
        self.rng = np.random.default_rng(seed)
        self.M = self.rng.normal(0.0, scale, (n_features, n_action_features))
        self.drift = drift or Drift()
        self._worlds = (self.M, np.random.default_rng([seed, 7]).normal(
            0.0, scale, (n_features, n_action_features)))
        self.items = self._new_items(n_items)
        self.ids = np.arange(n_items)
        self.next_id = n_items
        self.seen = np.zeros(n_items, dtype=bool)
        self.t = 0
        self.queries = queries
        if queries is not None:
            self.contexts = np.stack([self._context() for _ in range(queries)])
            self.candidates = np.stack([self._candidates() for _ in range(queries)])

    def _new_items(self, n: int) -> np.ndarray:
        return self.rng.normal(0.0, 1.0 / np.sqrt(self.n_action_features),
                               (n, self.n_action_features))

    def relevance(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """True ``gamma(x, a) = sigmoid(x^T M a + bias)`` of each action row (with
        ``binary``: 1 where the logit is positive, else 0)."""
        logits = actions @ (x @ self.M) + self.bias
        if self.binary:
            return (logits > 0.0).astype(np.float64)
        out: np.ndarray = 1.0 / (1.0 + np.exp(-logits))
        return out

    def _churn(self) -> None:
        n = round(self.churn * self.items.shape[0])
        if n == 0:
            return
        replaced = self.rng.choice(self.items.shape[0], size=n, replace=False)
        self.items[replaced] = self._new_items(n)
        self.ids[replaced] = np.arange(self.next_id, self.next_id + n)
        self.seen[replaced] = False
        self.next_id += n

    def _context(self) -> np.ndarray:
        z = self.rng.normal(0.0, 1.0 / np.sqrt(self.n_features - 1), self.n_features - 1)
        return np.r_[1.0, z]

    def _candidates(self) -> np.ndarray:
        return self.rng.choice(self.items.shape[0], size=self.n_candidates, replace=False)

    def request(self) -> Request:
        """The next request (the catalogue churns first when its period is due; a query of
        the pool when there is one)."""
        if self.queries is None and self.t > 0 and self.t % self.churn_every == 0:
            self._churn()
        if self.drift.kind != "none":
            share = self.drift.share(np.array([self.t]))[0]
            if self.drift.kind == "churn":
                share = (share > np.arange(self.n_features)).astype(np.float64)
            self.M = rotated(*self._worlds, share)
        if self.queries is None:
            query, x, rows = self.t, self._context(), self._candidates()
        else:
            query = int(self.rng.integers(self.queries))
            x, rows = self.contexts[query], self.candidates[query]
        actions = self.items[rows].copy()
        new = ~self.seen[rows]
        self.seen[rows] = True
        self.t += 1
        return Request(query=query, x=x.copy(), ids=self.ids[rows].copy(), actions=actions,
                       relevance=self.relevance(x, actions), new=new)

    def clicks(self, request: Request, ranking: np.ndarray) -> np.ndarray:
        """Observed clicks of the candidates at ``ranking`` (row indices, slot order)."""
        k = len(ranking)
        examined = self.rng.random(k) < self.theta[:k]
        relevant = self.rng.random(k) < request.relevance[ranking]
        if self.trust is not None:
            rate = np.where(relevant, 1.0 - self.rho1, self.trust[:k])
            return (examined & (self.rng.random(k) < rate)).astype(np.float64)
        true_click = (examined & relevant).astype(np.float64)
        return noisy_clicks(true_click, self.rho0, self.rho1, self.rng)

    def slot_noise(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``(theta_k, rho0_k, rho1)`` of the per-slot click model of
        :mod:`app.learners.noise_slots`, ``P(click | k, R) = theta_k (R (1 - rho1) + (1 - R)
        rho0_k)``, that this stream's clicks follow given the relevance draw ``R``: with
        ``trust``, its own parameters; with flips, ``P(click | k, R) = rho0 + beta theta_k R``
        (``beta = 1 - rho0 - rho1``: a click can come from an unexamined item), the same
        model with ``theta'_k = (rho0 + beta theta_k) / (1 - rho1)``, ``rho0'_k = rho0 /
        theta'_k`` and ``rho1``.

        >>> theta, rho0, rho1 = RankSimulator(theta=(1.0, 0.5), slots=2, rho0=0.1,
        ...                                   rho1=0.2).slot_noise()
        >>> np.round(theta, 4).tolist(), np.round(rho0, 4).tolist(), rho1
        ([1.0, 0.5625], [0.1, 0.1778], 0.2)
        """
        if self.trust is not None:
            return self.theta.copy(), self.trust.copy(), float(self.rho1)
        beta = 1.0 - self.rho0 - self.rho1
        theta = (self.rho0 + beta * self.theta) / (1.0 - self.rho1)
        return theta, self.rho0 / theta, float(self.rho1)

    def values(self, request: Request, ranking: np.ndarray) -> tuple[float, float, float]:
        """``(played, oracle, random)`` values of a ranking (module docstring)."""
        k = len(ranking)
        theta = self.theta[:k]
        best = np.sort(request.relevance)[::-1][:k]
        return (float(theta @ request.relevance[ranking]), float(theta @ best),
                float(request.relevance.mean() * theta.sum()))


def gap_closed(played: np.ndarray, oracle: np.ndarray, random: np.ndarray) -> float:
    """Share of the random-to-oracle gap a policy closes: ``sum(played - random) /
    sum(oracle - random)`` over the rounds given.

    >>> gap_closed(np.array([0.8]), np.array([1.0]), np.array([0.5]))
    0.6000000000000001
    """
    return float((played - random).sum() / (oracle - random).sum())
