"""The service benchmark's report: trainer-lag percentiles and the goal verdicts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from app.bench.service import STALL_THRESHOLD_MS, goals, lag_percentiles, with_disturbances


def test_lag_is_from_each_ack_to_the_first_poll_showing_it_applied() -> None:
    acks = [(1.0, 1000), (2.0, 2000), (3.0, 3000)]
    applied = [(0.9, 0), (1.5, 1000), (2.5, 1500), (2.7, 2000), (3.05, 3000)]
    lag = lag_percentiles(acks, applied)
    assert lag["lags_s"] == pytest.approx([0.5, 0.7, 0.05])
    assert lag["unapplied"] == 0
    assert lag["max_s"] == pytest.approx(0.7)


def test_a_poll_before_the_ack_does_not_count_and_unapplied_batches_are_reported() -> None:
    # the count already covers the batch at 0.5 s, but the batch was acked at 1.0 s
    lag = lag_percentiles([(1.0, 10), (2.0, 20)], [(0.5, 10), (1.2, 10), (2.5, 15)])
    assert lag["lags_s"] == pytest.approx([0.2])
    assert lag["unapplied"] == 1


def _results(p99_ms: float, achieved: float, lag_p99: float, unapplied: int = 0,
             baseline: bool = True) -> dict[str, Any]:
    closed = {"predict_closed": [{"concurrency": 1, "per_second": 400.0},
                                 {"concurrency": 8, "per_second": 1400.0}],
              "baseline_closed": [{"concurrency": 1, "per_second": 500.0},
                                  {"concurrency": 8, "per_second": 2000.0}]}
    return {**(closed if baseline else {"predict_closed": closed["predict_closed"]}),
            "predict_open": [{"target_rate": 1000.0, "achieved_per_second": achieved,
                              "p99_ms": p99_ms}],
            **({"baseline_open": [{"target_rate": 500.0, "p99_ms": 3.0},
                                  {"target_rate": 1000.0, "p99_ms": 4.5}]} if baseline else {}),
            "trainer_steady": {"p99_s": lag_p99, "unapplied": unapplied,
                               "target_events_per_second": 10_000.0,
                               "achieved_events_per_second": 10_100},
            "feedback_batch": [{"in_flight": 2, "events_per_second": 18_000},
                               {"in_flight": 4, "events_per_second": 25_000}],
            "predict_batch": [{"in_flight": 2, "decisions_per_second": 19_000},
                              {"in_flight": 4, "decisions_per_second": 17_000}]}


def test_goals_hold_only_when_the_rate_was_achieved() -> None:
    met = goals(_results(15.0, 999.0, 0.3))
    assert met["p99_ms_at_1000_predicts_per_s"]["met"] is True
    # the baseline's own p99 at the same rate, as the reference
    assert met["p99_ms_at_1000_predicts_per_s"]["baseline_p99_ms"] == 4.5
    # peak over peak (1400 / 2000), not the best per-concurrency ratio (400 / 500)
    assert met["single_predict_peak_over_baseline_peak"] == {"value": 0.7, "target": ">= 0.6",
                                                             "met": True}
    # the capacity: the best over the in-flight counts
    assert met["batch_feedback_events_per_s"] == {"value": 25_000, "target": ">= 20000",
                                                  "met": True}
    assert met["batch_predict_decisions_per_s"]["value"] == 19_000
    assert met["batch_predict_decisions_per_s"]["met"] is False
    assert met["trainer_lag_p99_s_at_10k_events_per_s"]["met"] is True
    saturated = goals(_results(15.0, 700.0, 0.3, baseline=False))
    assert saturated["p99_ms_at_1000_predicts_per_s"]["met"] is False
    assert saturated["single_predict_peak_over_baseline_peak"]["met"] is None
    assert saturated["p99_ms_at_1000_predicts_per_s"]["baseline_p99_ms"] is None


def test_lag_goal_is_not_measured_when_a_batch_was_never_applied() -> None:
    verdict = goals(_results(15.0, 999.0, 0.3, unapplied=1))
    assert verdict["trainer_lag_p99_s_at_10k_events_per_s"]["met"] is None


async def test_each_phase_reports_the_cpu_share_the_host_stole_meanwhile() -> None:
    async def phase() -> dict[str, Any]:
        sum(i * i for i in range(200_000))  # some CPU time passes
        return {"p99_ms": 1.0}

    result = await with_disturbances(phase())
    assert result["p99_ms"] == 1.0
    if Path("/proc/stat").is_file():  # a share of the machine's CPU time over the phase
        assert isinstance(result["steal_percent"], float)
        assert 0.0 <= result["steal_percent"] <= 100.0
    else:
        assert result["steal_percent"] is None
    # no Redis given
    assert result["redis_forks"] is None and result["redis_stalls_ms"] is None
    assert result["redis_child_at_start"] is None


async def test_each_phase_counts_the_forks_of_the_services_redis(redis_url: str) -> None:
    redis = aioredis.Redis.from_url(redis_url)

    async def saves() -> dict[str, Any]:
        await redis.bgsave()  # a fork, as an AOF rewrite makes
        while (await redis.info("persistence"))["rdb_bgsave_in_progress"]:
            await asyncio.sleep(0.01)
        return {}

    async def quiet() -> dict[str, Any]:
        await redis.ping()
        return {}

    try:
        saved = await with_disturbances(saves(), redis)
        assert saved["redis_forks"] == 1 and saved["redis_child_at_start"] is False
        assert (await with_disturbances(quiet(), redis))["redis_forks"] == 0
    finally:
        await redis.aclose()


async def test_a_phase_that_begins_while_a_redis_child_runs_says_so(redis_url: str) -> None:
    redis = aioredis.Redis.from_url(redis_url)

    async def quiet() -> dict[str, Any]:
        await redis.ping()
        return {}

    await redis.set("bench:one-key", b"x")
    # Redis's own test knob: the save child sleeps this long (us) per key, so it outlives
    # the fork and the phase begins with it still running
    await redis.config_set("rdb-key-save-delay", 500_000)
    try:
        await redis.bgsave()
        during = await with_disturbances(quiet(), redis)
        assert during["redis_child_at_start"] is True and during["redis_forks"] == 0
        while (await redis.info("persistence"))["rdb_bgsave_in_progress"]:
            await asyncio.sleep(0.05)
        assert (await with_disturbances(quiet(), redis))["redis_child_at_start"] is False
    finally:
        await redis.config_set("rdb-key-save-delay", 0)
        await redis.delete("bench:one-key")
        await redis.aclose()


async def test_each_phase_reports_the_stalls_redis_logged_meanwhile(redis_url: str) -> None:
    redis = aioredis.Redis.from_url(redis_url)

    async def stalls() -> dict[str, Any]:
        await redis.execute_command("DEBUG", "SLEEP", "0.03")  # a 30 ms command
        return {}

    async def quiet() -> dict[str, Any]:
        await redis.ping()
        return {}

    await redis.config_set("latency-monitor-threshold", STALL_THRESHOLD_MS)
    try:
        stalled = (await with_disturbances(stalls(), redis))["redis_stalls_ms"]
        assert set(stalled) == {"command"} and 30 <= stalled["command"] < 1000
        # each phase starts from a reset monitor: the stall above is not this phase's
        assert (await with_disturbances(quiet(), redis))["redis_stalls_ms"] == {}
    finally:
        await redis.config_set("latency-monitor-threshold", 0)
        await redis.aclose()
