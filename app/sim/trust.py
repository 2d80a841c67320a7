"""Logged placements of a ranking learner on a trust-bias stream (the examination estimator's data).

:func:`placements` runs a ranking learner (``ridge_pl``) over a
:class:`~app.sim.rank.RankSimulator` and keeps, for every shown slot, what a
service logs (the slot, the placement's exact probability, the score the item
was placed with, the click, the query and item ids) and what only the simulator
knows (the item's true relevance), in the order the rows were shown.  :data:`THETA`,
:data:`TRUST_RHO0` and :data:`RHO1` are the setting the estimator's acceptance
tests use: examination ``(1, 0.6, 0.35)``, clicks on irrelevant examined items
falling with the slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.learners.base import stack_events
from app.learners.registry import build
from app.learners.slot_refresh import SlotRefresh
from app.sim.rank import RankSimulator

#: Examination per slot, relative to slot 0.
THETA = (1.0, 0.6, 0.35)
#: ``rho0_k``: chance an examined irrelevant item is clicked in slot ``k`` (trust bias).
TRUST_RHO0 = (0.2, 0.12, 0.06)
#: ``rho1``: chance an examined relevant item is not clicked.
RHO1 = 0.1


@dataclass(frozen=True)
class Placements:
    """One row per shown slot, in the order shown.

    Attributes: ``slot``, ``prob`` (the placement's probability given the slots
    before it), ``score`` (the learner's score when it placed the item),
    ``click``, ``relevance`` (true ``gamma``), ``request`` (request index), ``query``
    (:attr:`~app.sim.rank.Request.query`), ``item`` (the item's catalogue id), and
    ``gap`` (per request: played, oracle and random values, see
    :meth:`~app.sim.rank.RankSimulator.values`, and the greedy ranking's value).
    """

    slot: np.ndarray
    prob: np.ndarray
    score: np.ndarray
    click: np.ndarray
    relevance: np.ndarray
    request: np.ndarray
    query: np.ndarray
    item: np.ndarray
    gap: np.ndarray


def trust_simulator(seed: int, *, binary: bool = True, scale: float = 2.0,
                    trust: tuple[float, ...] = TRUST_RHO0, rho1: float = RHO1,
                    queries: int | None = None) -> RankSimulator:
    """The acceptance setting's stream (module docstring) with ``seed`` (``queries``: a
    fixed query pool, :class:`~app.sim.rank.RankSimulator`)."""
    return RankSimulator(theta=THETA, trust=trust, rho1=rho1, binary=binary, scale=scale,
                         seed=seed, queries=queries)


def placements(sim: RankSimulator, rounds: int, *, seed: int = 0, learn_batch: int = 50,
               params: dict[str, Any] | None = None, algorithm: str = "ridge_pl",
               learner: Any = None, estimate_every: int | None = None,
               refresh: Any = None) -> Placements:
    """Run ``algorithm`` (or the given ``learner``) on ``sim`` for ``rounds`` requests,
    learning in batches of ``learn_batch`` rounds decided with the same model.

    ``estimate_every``: every that many requests a
    :class:`~app.learners.slot_refresh.SlotRefresh` runs the per-slot estimate on the newest
    :data:`~app.learners.noise_publish.SLOT_BUFFER` rows and, when published, the learner
    learns from the clicks it corrects (``set_slot_noise``), as in the service (whose
    schedule is every :data:`~app.learners.noise_publish.ANCHOR_EVERY` rows: ``noisyloop
    replay --task rank`` runs that one).  ``refresh``: a
    :class:`~app.learners.slot_refresh.SlotRefresh` of ``learner`` to run instead (its own
    schedule; the caller keeps it to read what it published).
    """
    if learner is None:
        learner = build("rank", algorithm, n_features=sim.n_features,
                        params={"n_action_features": sim.n_action_features,
                                "slots": sim.slots, **(params or {})}, seed=seed)
    if refresh is None and estimate_every:
        refresh = SlotRefresh(learner, every=estimate_every * sim.slots)
    cols: list[list[np.ndarray]] = [[] for _ in range(8)]
    gap = np.zeros((rounds, 4))
    pending: list[dict[str, np.ndarray]] = []
    for t in range(rounds):
        request = sim.request()
        decision = learner.decide(request.x, actions=request.actions)
        ranking = np.array([r["index"] for r in decision.output["ranking"]])
        gap[t, :3] = sim.values(request, ranking)
        gap[t, 3] = sim.values(request, np.array(decision.output["greedy"]))[0]
        clicks = sim.clicks(request, ranking)
        k = ranking.shape[0]
        for col, values in zip(cols, (np.arange(k), decision.context["probabilities"][:k],
                                      decision.context["scores"][:k], clicks,
                                      request.relevance[ranking], np.full(k, t),
                                      np.full(k, request.query), request.ids[ranking]),
                               strict=True):
            col.append(np.asarray(values, dtype=np.float64))
        pending.append({**decision.context, "clicks": np.pad(clicks, (0, sim.slots - k))})
        if len(pending) == learn_batch or t == rounds - 1:
            batch = stack_events(pending)
            learner.learn_many(batch)
            if refresh is not None:
                refresh.observe(batch)
            pending = []
    slot, prob, score, click, relevance, *ids = (np.concatenate(c) for c in cols)
    request_index, query, item = (c.astype(np.intp) for c in ids)
    return Placements(slot.astype(np.intp), prob, score, click, relevance, request_index,
                      query, item, gap)


def simulated_placements(requests: int, *, seed: int, candidates: int = 6,
                         temperature: float = 0.1, epsilon: float = 0.05,
                         anchor_share: float = 0.03, request_sd: float = 0.0,
                         theta: tuple[float, ...] = THETA,
                         trust: tuple[float, ...] = TRUST_RHO0, rho1: float = RHO1,
                         graded: float | None = None, score_noise: float = 0.5
                         ) -> tuple[np.ndarray, ...]:
    """Logged rows ``(slot, prob, score, click, relevance)`` of a fixed scorer's
    randomised placements, vectorised over requests (fast data for the estimator's tests).

    Each candidate has a latent logit ``l = a + b``, ``b ~ N(0, 2^2)`` its own and
    ``a ~ N(0, request_sd^2)`` shared by its request's candidates; it is relevant
    when ``l > 0`` (binary), or with probability ``sigmoid(graded * l)`` when
    ``graded`` is given.  The scorer sees ``sigmoid(a / 2 + b + N(0, score_noise^2))``
    (half the request's shift: with ``request_sd > 0`` the items of one score reach
    lower slots more often when their request is better, so the share of relevant
    items at a score differs by slot); slots are filled in order by the same
    mixture as ``ridge_pl``'s policy (softmax of the scores at ``temperature``,
    ``epsilon`` spread uniformly over the candidates left, ``anchor_share`` on the
    lowest-scored one left), each placement's probability given the slots before it
    logged; clicks follow the trust-bias model with ``theta``, ``trust`` (``rho0_k``)
    and ``rho1``.
    """
    rng = np.random.default_rng(seed)
    m = len(theta)
    own = rng.normal(0.0, 2.0, (requests, candidates))
    seen = own + rng.normal(0.0, score_noise, own.shape)
    shift = rng.normal(0.0, request_sd, (requests, 1)) if request_sd else np.zeros((requests, 1))
    logit = own + shift
    gamma = (logit > 0.0).astype(np.float64) if graded is None else 1.0 / (
        1.0 + np.exp(-graded * logit))
    score = 1.0 / (1.0 + np.exp(-(seen + shift / 2.0)))
    left = np.ones((requests, candidates), dtype=bool)
    rows = np.arange(requests)
    cols: list[list[np.ndarray]] = [[] for _ in range(5)]
    for k in range(m):
        z = np.where(left, np.exp((score - score.max(axis=1, keepdims=True)) / temperature), 0.0)
        lowest = np.argmin(np.where(left, score, np.inf), axis=1)
        p = (1.0 - epsilon - anchor_share) * z / z.sum(axis=1, keepdims=True) + epsilon * (
            left / left.sum(axis=1, keepdims=True))
        p[rows, lowest] += anchor_share
        pick = np.minimum((p.cumsum(axis=1) < rng.random((requests, 1))).sum(axis=1),
                          candidates - 1)
        pick = np.where(left[rows, pick], pick, np.argmax(left * p, axis=1))
        left[rows, pick] = False
        relevant = rng.random(requests) < gamma[rows, pick]
        rate = np.where(relevant, 1.0 - rho1, trust[k]) * theta[k]
        click = (rng.random(requests) < rate).astype(np.float64)
        for col, values in zip(cols, (np.full(requests, k), p[rows, pick], score[rows, pick],
                                      click, gamma[rows, pick]), strict=True):
            col.append(values)
    order = np.arange(requests * m).reshape(m, requests).T.reshape(-1)  # request by request
    return tuple(np.concatenate(c)[order] for c in cols)
