"""Checks of the label anchor estimate's assumptions, measured in the worlds they fail in.

The streams of ``bench/bench_noise_withdraw.py`` (the service's pipeline in process,
:func:`app.sim.relevance.label_plays`: ``linucb_diag`` at its defaults, the trainer's shadow
scorer, rates (0.1, 0.2), an estimate every :data:`~app.learners.noise_publish.ANCHOR_EVERY`
plays up to 30,000: 12 refreshes a seed) over seeds 0-9 (that bench's) and 10-19 (held
out), in the worlds ``graded`` 0.2/0.45/0.7, ``best_half`` 0.5/0.35/0.2/0.05,
``context_graded`` and ``one_right``.  Each candidate decides every refresh:

* ``service``: the service's rule (:func:`~app.learners.noise_publish.anchor_estimate`);
* ``nested_bands``: also refused when the top band (the top ``q`` of the recent scores)
  clicks above the next band (the top ``2 q`` less the top ``q``) by more than the one-sided
  95% bound of the difference (``m_q - m_next - z se > 0``): the rho1 of the two nested
  bands differ by more than their combined interval; ``nested_bands_99`` the same at 99%;
* ``top_trend``: also refused when the least-squares slope of the click on the score's rank
  (0 to 1) inside the top band is above 0 by more than its one-sided 95% bound (robust
  standard error);
* ``explored_ridge``: the bottom set ranked, instead of by the shadow scorer's margin, by the
  predicted click rate of the played label from a ridge regression fitted on the explored
  plays alone (:attr:`app.sim.relevance.Plays.explored_score`; the service logs no such
  score);
* ``rank_average``: the bottom set ranked by the mean of the two rankings' shares (the
  margin's and ``explored_ridge``'s, among the explored plays; the margin's alone before the
  explored regression scores);
* ``oracle_bottom``: the bottom set ranked by the true relevance of the played label (not
  observable: the bound of any ranking);
* ``agree_0.05``, ``agree_0.04``: the service's rule with a smaller ``agree_tolerance`` (the
  largest disagreement of the bottom anchor taken as agreeing; the service's is 0.065).

Per world and seed range, out of 120 refreshes: ``published``, ``shown`` (the rates in use are
a published estimate not withdrawn: :func:`~app.learners.noise_publish.shows_published`),
``shown_wrong`` (shown, and either rate more than 0.05 from the truth) and ``shown_within``.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_noise_graded_checks.py   # ~30 CPU seconds

Writes ``bench/results/noise-graded-checks.json``.
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from app.bench.machine import machine_info
from app.learners.noise_anchor import AnchorEstimate, band_mean, estimate_from_anchors, top_set
from app.learners.noise_publish import ANCHOR_EVERY, anchor_estimate, outcome, shows_published
from app.sim.relevance import (
    Plays,
    World,
    best_half,
    context_graded,
    graded,
    label_plays,
    one_right,
)

RESULTS = Path(__file__).resolve().parent / "results"
RATES = (0.1, 0.2)
PLAYS = 30_000
SEED_RANGES = {"0-9": range(10), "10-19": range(10, 20)}
WORLDS: dict[str, Callable[[], World]] = {
    "graded": graded, "best_half": best_half, "context_graded": context_graded,
    "one_right": one_right}
_DEFAULTS = inspect.signature(estimate_from_anchors).parameters
#: The estimator's top band: the top ``TOP_FRACTION`` of the newest ``RECENT`` of the plays.
TOP_FRACTION = float(_DEFAULTS["top_fraction"].default)
RECENT = float(_DEFAULTS["recent_fraction"].default)
Z = NormalDist().inv_cdf(0.95)
Z99 = NormalDist().inv_cdf(0.99)
#: The smaller ``agree_tolerance`` values measured beside the service's.
AGREE_TOLERANCES = (0.05, 0.04)


def nested_excess(score: np.ndarray, click: np.ndarray, z: float = Z) -> float:
    """``m_q - m_next - z se``: the top band's click rate less the next band's, less the
    one-sided bound of the difference (``z``: 95%; module docstring)."""
    ones = np.ones(score.shape[0])
    top = top_set(score, TOP_FRACTION, RECENT)
    following = np.setdiff1d(top_set(score, 2.0 * TOP_FRACTION, RECENT), top)
    m_top, psi_top = band_mean(ones, click, top)
    m_next, psi_next = band_mean(ones, click, following)
    se = math.sqrt(float(psi_top @ psi_top + psi_next @ psi_next)) / score.shape[0]
    return m_top - m_next - z * se


def trend_excess(score: np.ndarray, click: np.ndarray) -> float:
    """The slope of the click on the score's rank (0 to 1) inside the top band less its
    one-sided 95% bound (heteroscedasticity-robust standard error)."""
    top = top_set(score, TOP_FRACTION, RECENT)
    rank = np.argsort(np.argsort(score[top], kind="stable"), kind="stable")
    r = rank / max(top.size - 1, 1) - 0.5
    r -= r.mean()
    y = click[top] - click[top].mean()
    slope = float(r @ y / (r @ r))
    se = math.sqrt(float((r * r) @ (y - slope * r) ** 2)) / float(r @ r)
    return slope - Z * se


def shares(values: np.ndarray) -> np.ndarray:
    """Each non-NaN value's share of rank among them (in (0, 1)); NaN stays NaN."""
    out = np.full(values.shape, np.nan)
    ok = ~np.isnan(values)
    out[ok] = (np.argsort(np.argsort(values[ok], kind="stable"), kind="stable") + 0.5) / ok.sum()
    return out


def bottom_scores(plays: Plays, t: int, n_classes: int) -> dict[str, np.ndarray]:
    """The rankings of the first ``t`` plays' explored plays each bottom-set candidate uses."""
    assert plays.explored_score is not None
    explored = plays.prob[:t] <= (1.0 + 1e-9) / n_classes
    margin = np.where(explored, plays.score[:t], np.nan)
    ridge = np.where(explored, plays.explored_score[:t], np.nan)
    both = ~np.isnan(margin) & ~np.isnan(ridge)
    average = shares(margin)
    average[both] = (shares(np.where(both, margin, np.nan))[both]
                     + shares(np.where(both, ridge, np.nan))[both]) / 2.0
    return {"explored_ridge": ridge, "rank_average": average,
            "oracle_bottom": np.where(explored, plays.relevance[:t], np.nan)}


def refresh(plays: Plays, t: int, n_classes: int) -> dict[str, AnchorEstimate | None]:
    """Every candidate's estimate at ``t`` plays (None: the service's, refused by the
    candidate's check)."""
    prob, score, click = plays.prob[:t], plays.score[:t], plays.click[:t]
    service = anchor_estimate(prob, score, click, n_classes, {}, one_right_label=True)
    out: dict[str, AnchorEstimate | None] = {"service": service}
    checks: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
        "nested_bands": nested_excess, "top_trend": trend_excess,
        "nested_bands_99": lambda s, f: nested_excess(s, f, Z99)}
    for name, check in checks.items():
        out[name] = None if service.published and check(score, click) > 0.0 else service
    for name, ranking in bottom_scores(plays, t, n_classes).items():
        out[name] = estimate_from_anchors(prob, score, click, n_classes, bottom_score=ranking)
    for tolerance in AGREE_TOLERANCES:
        out[f"agree_{tolerance}"] = estimate_from_anchors(prob, score, click, n_classes,
                                                          agree_tolerance=tolerance)
    return out


def summary(runs: list[list[dict[str, Any]]]) -> dict[str, int]:
    """Counts over the seeds' refreshes (module docstring)."""
    counts = {"refreshes": 0, "published": 0, "shown": 0, "shown_wrong": 0, "shown_within": 0}
    for outs in runs:
        kept: dict[str, Any] | None = None
        for out, shown in zip(outs, shows_published(outs), strict=True):
            counts["refreshes"] += 1
            counts["published"] += out["status"] == "published"
            kept = out if out["status"] == "published" else kept
            if shown and kept is not None:
                within = all(abs(kept[k] - truth) <= 0.05
                             for k, truth in zip(("rho0", "rho1"), RATES, strict=True))
                counts["shown"] += 1
                counts["shown_within" if within else "shown_wrong"] += 1
    return counts


def main() -> None:
    started = time.process_time()
    out: dict[str, Any] = {"machine": machine_info(), "rates": RATES, "plays": PLAYS,
                           "every": ANCHOR_EVERY, "worlds": {}}
    for name, make in WORLDS.items():
        out["worlds"][name] = {}
        for label, seeds in SEED_RANGES.items():
            runs: dict[str, list[list[dict[str, Any]]]] = {}
            for seed in seeds:
                world = make()
                plays = label_plays(world, PLAYS, RATES, seed, explored_scorer=True)
                per_seed: dict[str, list[dict[str, Any]]] = {}
                for t in range(ANCHOR_EVERY, PLAYS + 1, ANCHOR_EVERY):
                    for cand, est in refresh(plays, t, world.n_classes).items():
                        per_seed.setdefault(cand, []).append(
                            outcome(est) if est is not None
                            else {"status": "insufficient_data", "reason": "anchor_not_flat"})
                for cand, outs in per_seed.items():
                    runs.setdefault(cand, []).append(outs)
            out["worlds"][name][label] = {cand: summary(r) for cand, r in runs.items()}
            for cand, counts in out["worlds"][name][label].items():
                print(f"{name:15s} seeds {label:5s} {cand:15s} {counts}", flush=True)
    out["cpu_seconds"] = round(time.process_time() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "noise-graded-checks.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
