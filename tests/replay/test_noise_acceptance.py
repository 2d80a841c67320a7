"""The anchor estimator's replay acceptance on a reduced but representative set of runs.

Replays of 20,000 events at default settings (SynSep-like and digits,
``rcine`` and ``linucb_diag``, the three noise settings), each learned event
scored out of sample by a :class:`~app.learners.noise_anchor.ProgressiveScorer`
in stream order and the rates estimated every 2,500 events from all the
plays so far, as the service's trainer and nrest role do.  At 20,000 events
every run publishes an estimate within 0.05 of both true rates, and the
intervals hold both rates in at least 85% of the published (run, refresh)
cases, at least 20 of them.  ``bench/results_noise.py`` measures the full set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.cli import build_parser
from app.learners.noise_anchor import AnchorEstimate, ProgressiveScorer, estimate_from_anchors
from app.replay import label

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

ROUNDS, EVERY, SEED = 20_000, 2_500, 1_001
RUNS = [("synsep", "rcine", (0.2, 0.4)), ("synsep", "linucb_diag", (0.1, 0.3)),
        ("synsep", "linucb_diag", (0.3, 0.1)), ("digits", "rcine", (0.3, 0.1)),
        ("digits", "rcine", (0.1, 0.3)), ("digits", "linucb_diag", (0.2, 0.4))]


def estimates(dataset: str, algorithm: str, rho: tuple[float, float]) -> list[AnchorEstimate]:
    """The anchor estimate every ``EVERY`` learned events of one replay."""
    args = build_parser().parse_args([
        "replay", "--dataset", dataset, "--algorithm", algorithm, "--rounds", str(ROUNDS),
        "--rho0", str(rho[0]), "--rho1", str(rho[1]), "--no-progress"])
    K = label.setup(args, SEED).n_classes
    cols: dict[str, list[np.ndarray]] = {"prob": [], "score": [], "click": []}
    out: list[AnchorEstimate] = []
    scorer: list[ProgressiveScorer] = []
    seen = [0]

    def observe(events: list[dict[str, Any]]) -> None:
        X = np.stack([e["x"] for e in events])
        click = np.array([float(e["click"]) for e in events])
        if not scorer:
            scorer.append(ProgressiveScorer(X.shape[1], K))
        before, seen[0] = seen[0], seen[0] + len(events)
        cols["score"].append(scorer[0].score_and_learn(
            X, np.array([int(e["played"]) for e in events]), click))
        cols["prob"].append(np.array([float(e["prob"]) for e in events]))
        cols["click"].append(click)
        if seen[0] // EVERY > before // EVERY:
            out.append(estimate_from_anchors(*(np.concatenate(cols[k])
                                               for k in ("prob", "score", "click")), K))

    label.run(args, SEED, lambda _: None, observe)
    return out


def test_published_estimates_within_tolerance_and_intervals_cover() -> None:
    cases = covered = 0
    for dataset, algorithm, rho in RUNS:
        est = estimates(dataset, algorithm, rho)
        assert len(est) == ROUNDS // EVERY
        final = est[-1]
        assert final.published, (dataset, algorithm, rho, final.reason)
        assert abs(final.rho0 - rho[0]) <= 0.05 and abs(final.rho1 - rho[1]) <= 0.05, (
            dataset, algorithm, rho, final)
        for e in est:
            if e.published:
                cases += 1
                covered += (e.rho0_interval[0] <= rho[0] <= e.rho0_interval[1]
                            and e.rho1_interval[0] <= rho[1] <= e.rho1_interval[1])
    assert cases >= 20 and covered >= 0.85 * cases, (cases, covered)
