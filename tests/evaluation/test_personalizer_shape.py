"""The choices made on a Personalizer evaluation's results (:mod:`app.evaluation.personalizer`):
the reported ``optimalPolicy`` and auto-optimization's switch rule."""

from __future__ import annotations

from typing import Any

from app.evaluation.personalizer import optimal_policy, switch_to


def _entry(name: str, source: str, low: float, high: float,
           insufficient: bool = False) -> dict[str, Any]:
    return {"name": name, "policySource": source,
            "summary": {"expectedReward": None if insufficient else (low + high) / 2,
                        "confidenceInterval": [low, high]}}


def test_a_switch_needs_an_interval_wholly_above_the_online_ones() -> None:
    online = _entry("Online Policy", "Online", 0.40, 0.50)
    random = _entry("Random Policy", "Random", 0.60, 0.70)  # never a candidate
    touching = _entry("exploration-0.1", "OfflineExperimentation", 0.50, 0.70)
    assert switch_to([online, random, touching]) is None  # a shared bound is no separation
    above = _entry("exploration-0.05", "OfflineExperimentation", 0.51, 0.60)
    higher = _entry("exploration-0.02", "OfflineExperimentation", 0.55, 0.90)
    chosen = switch_to([online, random, touching, above, higher])
    assert chosen is not None and chosen["name"] == "exploration-0.02"  # highest lower bound
    assert switch_to([random, above]) is None  # no online value: nothing to beat


def test_a_flagged_estimate_counts_with_its_widened_interval() -> None:
    online = _entry("Online Policy", "Online", 0.40, 0.50)
    flagged = _entry("custom", "Custom", 0.55, 0.95, insufficient=True)
    assert switch_to([online, flagged])["name"] == "custom"  # type: ignore[index]
    assert optimal_policy([online, flagged]) is None  # no point estimate to report
    plain = _entry("exploration-0.2", "OfflineExperimentation", 0.3, 0.6)
    assert optimal_policy([online, flagged, plain]) == "exploration-0.2"
