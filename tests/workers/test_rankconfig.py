"""The times a configuration's replay reads from the decision log's entries
(:func:`workers.rankconfig.line_times`): applied from the entry's id, joined from the event's
stream id, decided a reward wait before the join for a timeout (every event when rewards are
summed to the deadline), and the replay's lag from the loop's feedback settings."""

from __future__ import annotations

from typing import Any

from app.learners.config import ModelConfig
from app.store.decisionlog import COLUMNS, LogEntry, LoggedBatch
from workers.logchunks import line_events
from workers.rankconfig import line_times, replay_lag_ms


def _config(**feedback: Any) -> ModelConfig:
    return ModelConfig.of({"model_id": "m", "task": "rank", "algorithm": "ridge_pl",
                           "n_features": 2, "params": {"slots": 1, "n_action_features": 2},
                           "feedback": {"wait_seconds": 10, **feedback}})


def _batch(applied: int, events: list[tuple[str, str]]) -> LogEntry:
    """A logged batch applied at ``applied`` ms of ``(stream id, kind)`` events."""
    packed = LoggedBatch.pack([[s for s, _ in events], [k for _, k in events],
                               [f"e{s}" for s, _ in events], [b""] * len(events),
                               [b""] * len(events)])
    return LogEntry(f"{applied}-0", {b"k": b"events", b"v": b"1",
                                     b"n": str(len(events)).encode(), b"L": packed.lengths,
                                     **dict(zip(COLUMNS, packed.columns, strict=True))})


ENTRIES = [_batch(100_000, [("90000-0", "feedback"), ("95000-1", "timeout")]),
           LogEntry("100500-0", {b"k": b"marker", b"m": b"promote", b"d": b"{}"}),
           _batch(101_000, [("100800-0", "feedback")])]


def test_a_timeout_was_decided_a_reward_wait_before_it_joined() -> None:
    times = line_times(ENTRIES, line_events(ENTRIES), _config(on_timeout="no_click"))
    assert times.applied.tolist() == [100_000, 100_000, 100_500, 101_000]
    assert times.joined.tolist() == [90_000, 95_000, 100_500, 100_800]
    assert times.decided.tolist() == [90_000, 85_000, 100_500, 100_800]


def test_summed_rewards_join_a_reward_wait_after_the_decision() -> None:
    times = line_times(ENTRIES, line_events(ENTRIES), _config(aggregation="sum"))
    assert times.decided.tolist() == [80_000, 85_000, 90_500, 90_800]


def test_the_lag_is_the_reward_wait_when_a_decision_can_wait() -> None:
    assert replay_lag_ms(_config(on_timeout="no_click")) == 10_000
    assert replay_lag_ms(_config(aggregation="sum")) == 10_000
    assert replay_lag_ms(_config()) == 0
