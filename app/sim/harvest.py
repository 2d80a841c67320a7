"""Intervention harvesting from logged placements: the columns, a bootstrap over queries, limits.

Intervention harvesting (Agarwal et al. WSDM 2019, *Estimating Position Bias
without Intrusive Interventions*) compares the click rates of one (query,
item) pair shown at different positions.  Under the position-based model,
``P(click | k) = theta_k r``, the pooled ratio of the click rates at ``k`` and
at the top is ``theta_k``.  Under trust bias, ``P(click | k, R) = theta_k (R
(1 - rho1) + (1 - R) rho0_k)`` (:mod:`app.sim.trust`), the pair's click rate
at ``k`` is ``theta_k (rho0_k + R (1 - rho1 - rho0_k))``: the ratio mixes the
examination with the slots' false-click rates, and what it converges to
depends on the relevance of the pairs harvested (:func:`harvest_limits`).

:func:`harvest_columns` gives the rows as the columns ``query_id, doc_id,
position`` (1-based) and ``click`` that ``ultr-bias-toolkit``'s estimators
read (``pandas.DataFrame(columns)``), :func:`toolkit_estimates` runs its
three intervention-harvesting estimators on them, and :func:`bootstrap_queries`
gives an estimator's spread over resampled queries, which the toolkit does not.
The toolkit, pandas and torch (the ``peer`` extra) are imported only by
:func:`toolkit_estimates`; the rest is numpy (and scipy for the all-pairs limit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from app.learners.noise_slots import SlotEstimate, estimate_slot_noise
from app.learners.rank import RidgeRanker
from app.sim.trust import Placements, placements, trust_simulator

Columns = dict[str, np.ndarray]
#: The toolkit's estimators, in the order of :func:`toolkit_estimates`' rows.
ESTIMATORS = ("pivot", "adjacent_chain", "all_pairs")
#: All-pairs fit: epochs and Adam step.  The toolkit's default (5,000 epochs at 0.01) gives
#: the same position bias to 1e-4 on :mod:`app.sim.trust`'s streams, 20 times slower.
ALL_PAIRS_EPOCHS, ALL_PAIRS_LR = 200, 0.1
#: Queries in the pool of :func:`pool_placements` (20 candidates each).
QUERIES = 200


def pool_placements(seed: int, trust: tuple[float, ...], rounds: int,
                    queries: int = QUERIES) -> Placements:
    """``ridge_pl`` at the service's defaults (its randomised placements, ``anchor_share``
    0.03) on :func:`~app.sim.trust.trust_simulator`'s stream with ``rho0_k = trust`` and a
    fixed pool of ``queries`` queries, for ``rounds`` requests."""
    sim = trust_simulator(seed, trust=trust, queries=queries)
    learner = RidgeRanker(n_features=sim.n_features, n_action_features=sim.n_action_features,
                          slots=sim.slots, seed=seed, **RidgeRanker.service_defaults)
    return placements(sim, rounds, learner=learner)


def harvest_columns(rows: Placements) -> Columns:
    """The logged rows as ``query_id``, ``doc_id``, ``position`` (slot + 1), ``click``."""
    return {"query_id": rows.query, "doc_id": rows.item, "position": rows.slot + 1,
            "click": rows.click}


def toolkit_estimates(columns: Mapping[str, np.ndarray], seed: int = 0) -> np.ndarray:
    """``ultr-bias-toolkit``'s ``PivotEstimator`` (pivot: the top position),
    ``AdjacentChainEstimator`` and ``AllPairsEstimator`` on the rows, one row each of
    the position bias per position (:data:`ESTIMATORS`); ``seed`` seeds torch for the
    all-pairs fit.  Needs the ``peer`` extra."""
    import pandas as pd
    import torch
    from ultr_bias_toolkit.bias.intervention_harvesting import (
        AdjacentChainEstimator,
        AllPairsEstimator,
        PivotEstimator,
    )

    frame = pd.DataFrame(dict(columns))
    torch.manual_seed(seed)
    estimators = (PivotEstimator(), AdjacentChainEstimator(),
                  AllPairsEstimator(epochs=ALL_PAIRS_EPOCHS, lr=ALL_PAIRS_LR))
    return np.stack([est(frame).sort_values("position").examination.to_numpy(np.float64)
                     for est in estimators])


def bootstrap_queries(columns: Mapping[str, np.ndarray],
                      estimate: Callable[[Columns], np.ndarray], replicates: int,
                      seed: int) -> np.ndarray:
    """``estimate`` on ``replicates`` resamples of the queries, stacked on a first axis.

    Each resample draws as many queries as there are, with replacement, and keeps
    all their rows; a query drawn twice counts as two queries (new ids), so that
    its two copies are not pooled into one (query, item) pair.

    Rows and distinct query ids of three resamples of two queries (two rows and one):

    >>> cols = {"query_id": np.array([5, 5, 9]), "click": np.array([1.0, 0.0, 1.0])}
    >>> sizes = lambda c: [c["click"].size, np.unique(c["query_id"]).size]
    >>> bootstrap_queries(cols, sizes, 3, seed=0).tolist()
    [[2, 2], [3, 2], [4, 2]]
    """
    ids, query = np.unique(columns["query_id"], return_inverse=True)
    order = np.argsort(query, kind="stable")
    starts = np.searchsorted(query[order], np.arange(ids.size + 1))
    lengths = np.diff(starts)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(replicates):
        draw = rng.integers(ids.size, size=ids.size)
        picked = np.concatenate([order[starts[q]:starts[q + 1]] for q in draw])
        sample = {name: np.asarray(col)[picked] for name, col in columns.items()}
        sample["query_id"] = np.repeat(np.arange(ids.size), lengths[draw])
        out.append(np.asarray(estimate(sample)))
    return np.stack(out)


def pair_sums(rows: Placements, theta: np.ndarray, rho0: np.ndarray, rho1: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(C, N)``, ``slots x slots``: ``N[j, k]`` (query, item) pairs shown at both slots
    ``j`` and ``k``, ``C[j, k]`` the sum over them of their expected click rate at ``j``
    under the trust-bias model with the given parameters and the logged true relevance
    (what the toolkit's harvested sums ``c_0`` of ``(position_0, position_1) = (j + 1,
    k + 1)`` converge to)."""
    m = theta.shape[0]
    _, pair = np.unique(np.stack((rows.query, rows.item)), axis=1, return_inverse=True)
    pair = pair.ravel()
    shown = np.zeros((pair.max() + 1, m), dtype=np.float64)
    shown[pair, rows.slot] = 1.0
    relevance = np.bincount(pair, weights=rows.relevance) / np.bincount(pair)
    rate = theta * (rho0 + relevance[:, None] * (1.0 - rho1 - rho0))
    return (shown * rate).T @ shown, shown.T @ shown


def harvest_limits(rows: Placements, theta: tuple[float, ...], rho0: tuple[float, ...],
                   rho1: float) -> dict[str, np.ndarray]:
    """What the toolkit's ``pivot``, ``adjacent_chain`` and ``all_pairs`` estimates of the
    position bias converge to on these pairs, given the true parameters (module docstring).

    Pivot: ``C[k, 0] / C[0, k]``; adjacent chain: the product of ``C[j + 1, j] / C[j, j +
    1]`` for ``j < k``; all pairs: the fit of ``y_jk = e_j r_jk`` (``r`` symmetric) that
    minimises the toolkit's cross entropy ``-sum C log y + (N - C) log(1 - y)`` over
    ``j != k``, ``e / e_0``.  With one ``rho0`` in every slot all three are ``theta``.
    """
    t, r0 = np.asarray(theta, dtype=np.float64), np.asarray(rho0, dtype=np.float64)
    c, n = pair_sums(rows, t, r0, rho1)
    m = t.shape[0]
    pivot = c[:, 0] / c[0, :]
    chain = np.r_[1.0, np.cumprod(np.diag(c, -1) / np.diag(c, 1))]
    off = ~np.eye(m, dtype=bool)
    upper = np.triu_indices(m, 1)

    def loss(params: np.ndarray) -> float:
        e = 1.0 / (1.0 + np.exp(-params[:m]))
        r = np.zeros((m, m))
        r[upper] = 1.0 / (1.0 + np.exp(-params[m:]))
        y = (e[:, None] * (r + r.T))[off]
        return float(-np.sum(c[off] * np.log(y) + (n[off] - c[off]) * np.log1p(-y)))

    fit = minimize(loss, np.zeros(m + upper[0].size), method="L-BFGS-B")
    e = 1.0 / (1.0 + np.exp(-fit.x[:m]))
    return {"pivot": pivot, "adjacent_chain": chain, "all_pairs": e / e[0]}


@dataclass(frozen=True)
class PeerCheck:
    """Our per-slot estimate beside the toolkit's on the same rows.

    Attributes: ``ours`` (:func:`~app.learners.noise_slots.estimate_slot_noise` at its
    defaults, as the service runs it), ``toolkit`` (:func:`toolkit_estimates`, one row per
    :data:`ESTIMATORS`), ``sd`` (their standard deviations over the query resamples of
    :func:`bootstrap_queries`) and ``limits`` (:func:`harvest_limits` with the true
    parameters, same rows).
    """

    ours: SlotEstimate
    toolkit: np.ndarray
    sd: np.ndarray
    limits: np.ndarray


def peer_check(rows: Placements, theta: tuple[float, ...], rho0: tuple[float, ...],
               rho1: float, *, replicates: int = 20, seed: int = 0) -> PeerCheck:
    """Both estimates of the position bias on ``rows``, the toolkit's spread over
    ``replicates`` query resamples and the limits under the true parameters."""
    ours = estimate_slot_noise(rows.slot, rows.prob, rows.score, rows.click, len(theta))
    columns = harvest_columns(rows)
    boot = bootstrap_queries(columns, lambda c: toolkit_estimates(c, seed), replicates, seed)
    limits = harvest_limits(rows, theta, rho0, rho1)
    return PeerCheck(ours, toolkit_estimates(columns, seed), boot.std(axis=0, ddof=1),
                     np.stack([limits[name] for name in ESTIMATORS]))
