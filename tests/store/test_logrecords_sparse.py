"""A log line keeps each vector the codec stored sparse in the sparse form, per slot too; a
vector stored dense is the list it always was."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.store import codec
from app.store.decisionlog import COLUMNS, LogEntry, LoggedBatch
from app.store.logrecords import event_record

WIDE = 5_000


def _line(context: dict[str, np.ndarray], feedback: dict[str, np.ndarray]) -> dict[str, Any]:
    """The line of one logged event with these context and feedback fields."""
    batch = LoggedBatch.pack([["1-0"], ["feedback"], ["e1"], [codec.encode(context)],
                              [codec.encode(feedback)]])
    fields = {b"k": b"events", b"v": b"2", b"n": str(batch.n).encode(), b"L": batch.lengths,
              **dict(zip(COLUMNS, batch.columns, strict=True))}
    entry = LogEntry("5-0", fields)
    return event_record(entry, entry.events()[0])


def test_a_ranking_with_sparse_slot_features_keeps_each_slot_sparse() -> None:
    x = np.zeros(WIDE)
    x[[3, 4000]] = [1.5, -2.0]
    actions = np.zeros((3, WIDE))
    actions[0, 10], actions[2, WIDE - 1] = 1.0, 0.25
    context = {"x": x, "shown": np.array(3), "n_candidates": np.array(7),
               "ids": np.array([11, 12, 13], dtype=np.uint64), "actions": actions,
               "probabilities": np.array([0.5, 0.4, 1.0]), "scores": np.array([3.0, 2.0, 1.0])}
    line = _line(context, {"clicks": np.array([1.0, 0.0, 0.0])})
    assert line["features"] == {"size": WIDE, "indices": [3, 4000], "values": [1.5, -2.0]}
    slots = line["slots"]
    assert [s["features"] for s in slots] == [
        {"size": WIDE, "indices": [10], "values": [1.0]},
        {"size": WIDE, "indices": [], "values": []},
        {"size": WIDE, "indices": [WIDE - 1], "values": [0.25]}]
    assert [s["click"] for s in slots] == [1.0, 0.0, 0.0]
    assert [s["id_hash"] for s in slots] == [11, 12, 13]


def test_a_dense_context_is_a_list_as_before() -> None:
    context = {"x": np.array([0.0, 1.0, 2.5]), "played": np.array(1), "prob": np.array(0.5)}
    line = _line(context, {"click": np.array(1.0)})
    assert line["features"] == [0.0, 1.0, 2.5] and line["action"] == 1
    assert line["feedback"] == {"click": 1.0}

