"""app.evaluation.servicelog.label_log_of and rank_log_of: the decision log's records as
an evaluation log of each shape, read in one pass."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from app.evaluation.servicelog import label_log_of, rank_log_of


def label_records(X: np.ndarray) -> Iterator[dict[str, Any]]:
    for i, x in enumerate(X):
        yield {"type": "event", "stream_id": f"1-{i}", "features": x.tolist(), "action": i % 3,
               "propensity": 0.5, "greedy_action": 0, "feedback": {"click": float(i % 2)}}
        if i == 1:
            yield {"type": "reset", "stream_id": "2-0", "version": 3}


@pytest.mark.slow
def test_a_label_log_keeps_its_numbers_not_the_records() -> None:
    X = np.random.default_rng(0).standard_normal((20_000, 64))
    tracemalloc.start()
    try:
        read = label_log_of(label_records(X), 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the records themselves (a list of 64 floats and a dict each) would take ~8x X
    assert peak < 4 * X.nbytes
    np.testing.assert_array_equal(read.log.X, X)
    assert read.log.actions.tolist() == [i % 3 for i in range(20_000)]
    assert read.log.rewards.tolist() == [float(i % 2) for i in range(20_000)]
    assert read.stream_ids[:2] == ("1-0", "1-1") and not read.ranked


#: A rank model's export: two rankings (one with its count of candidates) and a marker.
RANK_LINES = [{"type": "event", "features": [1.0, 2.0], "n_candidates": 5,
               "slots": [{"slot": 0, "id_hash": 7, "propensity": 0.5, "click": 1.0},
                         {"slot": 1, "id_hash": 9, "propensity": 0.25}]},
              {"type": "promote", "version": 4},
              {"type": "event", "features": [3.0, 4.0],
               "slots": [{"slot": 0, "id_hash": 9, "propensity": 1.0, "click": 0.0}]}]

def test_a_rank_log_is_one_ranking_per_event_with_its_candidates() -> None:
    lines = RANK_LINES
    read = rank_log_of(iter(lines))
    assert read.ranked and read.log is None and read.ranking is not None
    ranking = read.ranking
    assert ranking.X.tolist() == [[1, 2], [3, 4]] and ranking.shown.tolist() == [2, 1]
    assert ranking.candidates.tolist() == [5, 0]  # 0: logged before the count was
    assert ranking.propensities.tolist() == [[0.5, 0.25], [1.0, 1.0]]
    assert ranking.clicks.tolist() == [[1.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(("read", "lines", "message"), [
    (label_log_of, [{"type": "reset"}], "no events"),
    (rank_log_of, [{"type": "reset"}], "no events"),
    (label_log_of, [{"type": "event", "features": [1.0], "action": 0, "propensity": 1.0,
                     "feedback": {"click": 1.0}},
                    {"type": "event", "features": [1.0], "slots": []}], "only label logs"),
    (rank_log_of, [{"type": "event", "features": [1.0], "slots": [{"slot": 0,
                                                                   "propensity": 1.0}]},
                   {"type": "event", "features": [1.0], "action": 0, "propensity": 1.0,
                    "feedback": {"click": 1.0}}], "only label logs"),
    (label_log_of, [{"type": "event", "features": [1.0]}], "only label logs"),
    (rank_log_of, [{"type": "event", "features": [1.0]}], "only label logs"),
    (rank_log_of, [{"type": "event", "features": [1.0], "slots": []}], "without a shown slot"),
    (rank_log_of, [{"type": "event", "features": [1.0],
                    "slots": [{"slot": 1, "propensity": 1.0}]}], "not 0, 1, ... in order"),
    (label_log_of, [{"type": "event", "features": [1.0], "action": 0, "propensity": 1.0}],
     "feedback.click"),
    (label_log_of, [{"type": "event", "features": [1.0], "action": 0, "propensity": 1.0,
                     "feedback": {"click": 1.0}},
                    {"type": "event", "features": [1.0, 2.0], "action": 0, "propensity": 1.0,
                     "feedback": {"click": 1.0}}], "different lengths"),
])
def test_logs_that_cannot_be_evaluated_say_why(read: Callable[..., object],
                                                lines: list[dict[str, Any]],
                                                message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read(lines, path="x.jsonl")
