"""The Page-Hinkley drift detector: false alarms, delay, batches and state."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.drift import PageHinkley


def _clicks(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    return (rng.random(n) < rate).astype(np.float64)


@pytest.mark.parametrize("rate", [0.9, 0.5, 0.05])
def test_update_raises_at_most_one_alarm_on_a_million_stationary_clicks(rate: float) -> None:
    rng = np.random.default_rng(11)
    detector = PageHinkley()
    for _ in range(100):  # trainer-sized batches of 10,000
        detector.update(_clicks(rng, 10_000, rate))
    assert detector.count_ == 1_000_000
    assert detector.detections_ <= 1


@pytest.mark.parametrize(("before", "after"), [(0.9, 0.1), (0.5, 0.35), (0.3, 0.2)])
def test_update_reports_a_fall_within_3000_events(before: float, after: float) -> None:
    rng = np.random.default_rng(12)
    detector = PageHinkley()
    assert detector.update(_clicks(rng, 20_000, before)).detected_at == []
    report = detector.update(_clicks(rng, 10_000, after))
    assert report.detected_at and 20_000 < report.detected_at[0] <= 23_000
    assert detector.last_detection_ == report.detected_at[-1]


def test_update_ignores_a_rise() -> None:
    rng = np.random.default_rng(13)
    detector = PageHinkley()
    detector.update(_clicks(rng, 5_000, 0.2))
    assert detector.update(_clicks(rng, 50_000, 0.8)).detected_at == []


def _equal_one_at_a_time(x: np.ndarray, strata: np.ndarray) -> None:
    whole, single = PageHinkley(), PageHinkley()
    found = whole.update(x, strata).detected_at
    for value, stratum in zip(x, strata, strict=True):
        single.update(np.array([value]), np.array([stratum]))
    assert found == [single.last_detection_] and single.detections_ == 1
    for name, value in whole.get_state().items():
        np.testing.assert_allclose(single.get_state()[name], value, rtol=1e-9, err_msg=name)


def test_batches_equal_one_at_a_time() -> None:
    x = np.r_[_clicks(np.random.default_rng(14), 3_000, 0.8),
              _clicks(np.random.default_rng(15), 2_000, 0.2)]
    _equal_one_at_a_time(x, np.zeros(x.shape[0], dtype=np.intp))


def test_state_round_trips() -> None:
    rng = np.random.default_rng(16)
    detector = PageHinkley()
    detector.update(_clicks(rng, 1_000, 0.6))
    twin = PageHinkley()
    twin.set_state(detector.get_state())
    x = _clicks(rng, 3_000, 0.2)
    assert twin.update(x) == detector.update(x)


def test_bad_input_and_state_are_refused() -> None:
    with pytest.raises(ParamError, match="signal"):
        PageHinkley().update(np.array([np.nan]))
    with pytest.raises(ParamError, match="threshold"):
        PageHinkley(threshold=0.0)
    state = PageHinkley().get_state()
    state["n_"] = np.array(-1)
    with pytest.raises(ParamError, match="state"):
        PageHinkley().set_state(state)


@pytest.mark.parametrize(("before", "after"), [(0.9, 0.1), (0.5, 0.35)])
def test_update_estimates_where_the_fall_began(before: float, after: float) -> None:
    rng = np.random.default_rng(17)
    detector = PageHinkley()
    detector.update(_clicks(rng, 20_000, before))
    report = detector.update(_clicks(rng, 10_000, after))
    change = report.detected_at[0] - report.since[0]
    # the last minimum of PH: the walk before the change falls by delta per event and
    # wanders by its noise; after it, it climbs by (fall - delta) per event
    assert 20_000 - 300 <= change <= 20_000 + 100 and report.since[0] >= 1


def test_restart_clears_the_drift_status_and_keeps_the_count() -> None:
    rng = np.random.default_rng(18)
    detector = PageHinkley()
    detector.update(_clicks(rng, 2_000, 0.9))
    detector.update(_clicks(rng, 1_000, 0.1))
    assert detector.status() == "drift" and detector.detections_ == 1
    detector.restart()
    assert detector.status() == "warming_up" and detector.detections_ == 1
    assert (int(detector.n_.sum()), detector.statistic_) == (0, 0.0)


def test_state_saved_without_the_minimum_position_is_read() -> None:
    state = PageHinkley().get_state()
    del state["minimum_at_"]
    state["count_"] = np.array(7, dtype=np.int64)
    detector = PageHinkley()
    detector.set_state(state)
    assert detector.minimum_at_ == 7


def test_strata_keep_a_switch_of_the_policy_from_raising_an_alarm() -> None:
    # The policy moves from a label clicked 0.7 to one clicked 0.2 for 3,000 events (what a
    # batch of exploration does): the plain test sees the reward fall by about 1 sd (alarm
    # after ~150 / 0.95 events), the stratified one sees each label keep its own rate.
    rng = np.random.default_rng(19)
    x = np.r_[_clicks(rng, 20_000, 0.7), _clicks(rng, 3_000, 0.2)]
    labels = np.r_[np.zeros(20_000, dtype=np.intp), np.ones(3_000, dtype=np.intp)]
    labels[:20_000][rng.random(20_000) < 0.05] = 1  # its own plays before: its stratum warms up
    x[:20_000][labels[:20_000] == 1] = _clicks(rng, int((labels[:20_000] == 1).sum()), 0.2)
    plain, stratified = PageHinkley(), PageHinkley()
    assert plain.update(x).detected_at
    assert stratified.update(x, labels).detected_at == []
    # ... and a fall within a stratum is still seen
    assert stratified.update(_clicks(rng, 3_000, 0.05), np.ones(3_000, dtype=np.intp)
                             ).detected_at


def test_stratified_batches_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(20)
    labels = rng.integers(0, 4, 5_000)
    x = _clicks(rng, 5_000, 0.6)
    x[3_000:][labels[3_000:] == 2] = 0.0
    _equal_one_at_a_time(x, labels)


def test_state_saved_with_one_stratum_as_numbers_is_read_as_stratum_0() -> None:
    rng = np.random.default_rng(21)
    detector = PageHinkley()
    detector.update(_clicks(rng, 1_000, 0.6))
    state = detector.get_state()
    old = {**state, "n_": state["n_"][0], "sum_": state["sum_"][0],
           "sum_sq_": state["sum_sq_"][0]}
    twin = PageHinkley()
    twin.set_state(old)
    x = _clicks(rng, 3_000, 0.2)
    assert twin.update(x) == detector.update(x)


def test_bad_strata_are_refused() -> None:
    with pytest.raises(ParamError, match="strata"):
        PageHinkley().update(np.ones(3), np.array([0, -1, 0]))
    with pytest.raises(ParamError, match="strata"):
        PageHinkley().update(np.ones(3), np.array([0.5, 0, 0]))


def test_strata_still_warming_up_see_an_early_fall_as_the_plain_test_does() -> None:
    # 40 strata, 1,500 events: none has the 100 events of its own a stratum needs, so each
    # event is compared with all of them; a fall 0.9 -> 0.1 (1.6 sd net of delta: alarm
    # after about 150 / 1.6 = 94 events) is seen within 200 events, as without strata
    rng = np.random.default_rng(22)
    x = np.r_[_clicks(rng, 1_500, 0.9), _clicks(rng, 1_000, 0.1)]
    strata = rng.integers(0, 40, x.shape[0])
    plain = PageHinkley().update(x).detected_at
    stratified = PageHinkley().update(x, strata).detected_at
    assert plain and stratified and 1_500 < stratified[0] <= 1_700
    assert abs(stratified[0] - plain[0]) <= 20
