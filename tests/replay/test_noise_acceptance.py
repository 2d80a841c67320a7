"""``noisyloop replay`` at its defaults publishes click-noise estimates as the service does.

Replays of 20,000 events at default settings (SynSep-like and digits,
``rcine`` and ``linucb_diag``, the three noise settings), each run through the
command's own parser and code: the learner starts from rates 0, the anchor
estimator runs every 2,500 events and a published estimate's rates go to the
learner.  At 20,000 events every run has published an estimate within 0.05 of
both true rates, every published interval is at most 0.1 wide, and at most one
published estimate per run has an interval that misses a true rate.  ``bench/results_noise.py
--part replay`` measures the full set (docs/results/noise.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.cli import build_parser
from app.commands.replay import replay

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

ROUNDS, EVERY, SEED = 20_000, 2_500, 1_001
RUNS = [("synsep", "rcine", (0.2, 0.4)), ("synsep", "linucb_diag", (0.1, 0.3)),
        ("synsep", "linucb_diag", (0.3, 0.1)), ("digits", "rcine", (0.3, 0.1)),
        ("digits", "rcine", (0.1, 0.3)), ("digits", "linucb_diag", (0.2, 0.4))]


def estimates(dataset: str, algorithm: str, rho: tuple[float, float]) -> list[dict[str, Any]]:
    """The estimates one ``noisyloop replay`` at its defaults reports."""
    args = build_parser().parse_args([
        "replay", "--dataset", dataset, "--algorithm", algorithm, "--rounds", str(ROUNDS),
        "--rho0", str(rho[0]), "--rho1", str(rho[1]), "--seed", str(SEED), "--no-progress"])
    _, (result,), _, _ = replay(args)
    assert result.extra["estimator"] == "anchor"
    out: list[dict[str, Any]] = result.extra["noise_estimates"]
    return out


@pytest.mark.parametrize(("dataset", "algorithm", "rho"), RUNS)
def test_published_estimates_within_tolerance_and_intervals_cover(
        dataset: str, algorithm: str, rho: tuple[float, float]) -> None:
    est = estimates(dataset, algorithm, rho)
    assert [e["t"] for e in est] == list(range(EVERY, ROUNDS + 1, EVERY))
    final = est[-1]
    assert final["status"] == "published", final["reason"]
    assert abs(final["rho0"] - rho[0]) <= 0.05 and abs(final["rho1"] - rho[1]) <= 0.05, final
    published = missed = 0
    for e in est:
        if e["status"] != "published":
            assert e["rho0"] is None and e["interval"]["rho0"] is None
            continue
        published += 1
        low0, high0 = e["interval"]["rho0"]
        low1, high1 = e["interval"]["rho1"]
        assert high0 - low0 <= 0.1 and high1 - low1 <= 0.1
        missed += not (low0 <= rho[0] <= high0 and low1 <= rho[1] <= high1)
    # each published pair holds both rates with probability >= 0.9; the estimates of one
    # run share most of their plays, so a miss tends to repeat: at most one per run
    assert published >= 3 and missed <= 1, (published, missed)
