"""Feature-importance reports: the scores listed, their names and their bound."""

from __future__ import annotations

import numpy as np

from app.evaluation.importance import MAX_FEATURE_SCORES, Importances, feature_scores


def test_a_wide_models_report_lists_its_highest_scores_alone() -> None:
    context = np.arange(1.0, 1501.0)  # 1,500 context buckets that scored
    found = Importances(context, np.zeros(4), decisions=10)
    scores = feature_scores(found, {})
    assert len(scores) == MAX_FEATURE_SCORES
    assert [s["bucket"] for s in scores[:2]] == [1499, 1498]
    assert scores[-1]["score"] == 1500.0 - MAX_FEATURE_SCORES + 1


def test_a_bucket_is_named_by_every_key_that_hashed_into_it() -> None:
    found = Importances(np.array([0.0, 2.0]), np.array([0.5]), decisions=3)
    names = {("c", 1): ["user.age", "user.tier=gold"], ("a", 0): ["item.price"]}
    assert feature_scores(found, names) == [
        {"featureName": "user.age | user.tier=gold", "namespace": "user", "score": 2.0,
         "kind": "context", "bucket": 1},
        {"featureName": "item.price", "namespace": "item", "score": 0.5, "kind": "action",
         "bucket": 0}]
    assert feature_scores(found, {})[0]["featureName"] == "#1"  # never named by a request
