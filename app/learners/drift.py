"""Drift detection on a model's reward: a Page-Hinkley test for a fall of its mean.

The signal is one observed reward per learned event (the clicks a learner's
:meth:`~app.learners.base.Learner.observed_clicks` gives a driver), each in a
*stratum* (the learner's :meth:`~app.learners.base.Learner.drift_strata`: for
a label learner, the played label and whether it was the greedy one).  With
``mean_{c,t-1}`` and ``sd_{c,t-1}`` the mean and standard deviation of the
signal of event ``t``'s stratum ``c`` since the last detection (before event
``t``), the statistic is

    u_t  = (mean_{c,t-1} - x_t) / sd_{c,t-1} - delta
    PH_t = sum_{s <= t} u_s,        alarm when  PH_t - min_{s <= t} PH_s > threshold,

the Page-Hinkley test for a decrease (Page 1954, *Continuous inspection
schemes*; Hinkley 1971; the form of Gama et al. 2014, *A Survey on Concept
Drift Adaptation*, section 3.2, and of River's ``drift.PageHinkley``) on the
signal standardised by its own spread, so that ``delta`` (the smallest fall
worth seeing, in standard deviations) and ``threshold`` hold for a click rate
of 0.02 as for one of 0.9.  Only falls count: a model that learns, or that
recovers after a change, raises its reward.  The first :data:`MIN_EVENTS`
events after a start or a detection only estimate the mean and spread
(``u = 0``); until a stratum has had :data:`MIN_EVENTS` events of its own,
its events are compared with the mean and spread of all the events (the
plain test), so that a change early in a model's life, while most strata
are still warming up, is seen as soon as without strata.

Why strata.  Each event is compared with the events of its own stratum, so
the test sees a change of the world and not one of the policy: a learner
that plays a worse label for a while (exploration, a batch of decisions made
on one state) changes which stratum the events fall in, not the rewards
within one.  With one stratum (every event in stratum 0) this is the plain
test on the signal.  A world that changes lowers the reward of the labels
the learner plays where it exploits: their strata fall, and the alarm comes
as soon as with the plain test (``docs/reliability.md`` has the delays).

The change is estimated where ``PH`` was lowest before the alarm (the last
event at which the signal still looked in control: Page 1954, the
Page-Hinkley change-point estimate): :attr:`DetectionReport.since` gives how
many events before each alarm that was, what a recovery relearns.

After a detection the test starts afresh (mean, spread and statistic).  A
batch is processed with cumulative sums (a few numpy passes, no per-event
Python), so a million events take milliseconds.  Implemented here rather than
with River's detector: the state must be arrays saved beside the model, a
batch must be one vectorised step, and River is a per-event Python loop that
brings pandas and scipy along.

Defaults.  With ``delta = 0.05`` and ``threshold = 150`` the in-control
average run length of a one-sided CUSUM with a known mean on standardised
Gaussian noise is about 7e8 events (Siegmund's approximation
``(exp(2 k h') - 2 k h' - 1) / (2 k^2)``, ``h' = h + 1.166``); the running
mean costs some of that margin: at ``threshold = 100`` (5e6 by the same
formula) Bernoulli(0.5) and (0.3) clicks raised 5 alarms over 20 million
events, at 150 none (``tests/learners/test_drift.py`` counts them over a
million).  A fall of ``D`` standard deviations is seen after about
``threshold / (D - delta)`` events: about 50 for the collapse of an abrupt
change, 600 to 900 for a 30% fall of a click rate of 0.5 or 0.3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.learners.base import ParamError, State, check_positive, check_state

#: Events after a start or a detection that only estimate the signal's mean and spread.
MIN_EVENTS = 100
#: Smallest standard deviation a standardised increment is divided by.
MIN_SD = 1e-3
#: Events after a detection during which a detector's status stays ``drift``.
DRIFT_EVENTS = 10_000


@dataclass(frozen=True)
class DetectionReport:
    """What :meth:`PageHinkley.update` saw in one batch."""

    detected_at: list[int]
    """Event counts (1-based, over the detector's life) at which a fall was detected."""
    statistic: float
    """``PH_t - min PH`` after the batch (the alarm fires above the threshold)."""
    since: list[int]
    """For each detection, the events from the estimated change (the last minimum of
    ``PH``) to the alarm, the alarm's event included (>= 1)."""


class PageHinkley:
    """One-sided Page-Hinkley test for a fall of a signal's mean (module docstring).

    Parameters
    ----------
    delta:
        Smallest fall worth detecting, in standard deviations of the signal.
    threshold:
        Alarm level of the statistic, in standard deviations.

    Attributes
    ----------
    count_:
        Events seen over the detector's life.
    detections_:
        Detections over its life.
    last_detection_:
        Event count of the last detection (0: none since the start or :meth:`restart`).
    n_, sum_, sum_sq_:
        Per stratum (index), the events, sum and sum of squares of the signal since the
        last start (as long as the largest stratum seen).
    statistic_, minimum_:
        ``PH`` and its running minimum since the last start.
    minimum_at_:
        Event count (over the detector's life) at which that minimum was reached.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> detector = PageHinkley()
    >>> detector.update((rng.random(20_000) < 0.9).astype(float)).detected_at
    []
    >>> report = detector.update((rng.random(5_000) < 0.3).astype(float))
    >>> len(report.detected_at), 20_000 < report.detected_at[0] < 20_100
    (1, True)
    >>> abs(report.detected_at[0] - report.since[0] - 20_000) < 20  # the change, estimated
    True
    """

    def __init__(self, *, delta: float = 0.05, threshold: float = 150.0) -> None:
        self.delta = check_positive("delta", delta)
        self.threshold = check_positive("threshold", threshold)
        self.count_ = 0
        self.detections_ = 0
        self.last_detection_ = 0
        self._restart()

    def _restart(self) -> None:
        self.n_ = np.zeros(0, dtype=np.int64)
        self.sum_, self.sum_sq_ = np.zeros(0), np.zeros(0)
        self.statistic_, self.minimum_ = 0.0, 0.0
        self.minimum_at_ = self.count_

    def restart(self) -> None:
        """Start the test afresh on a model that changed (a reset, rollback or promotion):
        the mean, spread and statistic are estimated again and the status is no longer
        ``drift``; the detections over the model's life stay counted."""
        self.last_detection_ = 0
        self._restart()

    def update(self, signal: np.ndarray, strata: np.ndarray | None = None) -> DetectionReport:
        """Test a batch of the signal in order, each event in its stratum (non-negative
        integers; None: all in stratum 0); returns the detections it raised."""
        x = np.asarray(signal, dtype=np.float64).ravel()
        if not np.isfinite(x).all():
            raise ParamError("signal", "contains non-finite values")
        c = (np.zeros(x.shape[0], dtype=np.intp) if strata is None
             else np.asarray(strata).ravel())
        if c.shape != x.shape or c.dtype.kind not in "iu" or (c.shape[0] and c.min() < 0):
            raise ParamError("strata", f"must be {x.shape[0]} non-negative integers")
        c = c.astype(np.intp)
        detected: list[int] = []
        since: list[int] = []
        while x.shape[0]:
            first = self._scan(x, c)
            if first is None:
                break
            self.count_ += first + 1
            self.detections_ += 1
            self.last_detection_ = self.count_
            detected.append(self.count_)
            since.append(self.count_ - self.minimum_at_)
            self._restart()
            x, c = x[first + 1:], c[first + 1:]
        return DetectionReport(detected, self.statistic_ - self.minimum_, since)

    def _before(self, x: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray]:
        """Events, sum and sum of squares of each event's stratum before it (the stored
        totals plus the batch's earlier events of that stratum, added in order)."""
        size = max(self.n_.shape[0], int(c.max()) + 1)
        if size > self.n_.shape[0]:
            grow = size - self.n_.shape[0]
            self.n_ = np.r_[self.n_, np.zeros(grow, dtype=np.int64)]
            self.sum_, self.sum_sq_ = np.r_[self.sum_, np.zeros(grow)], np.r_[
                self.sum_sq_, np.zeros(grow)]
        order = np.argsort(c, kind="stable")
        sorted_c = c[order]
        start = np.searchsorted(sorted_c, sorted_c, side="left")
        out = []
        for total, values in ((self.sum_, x[order]), (self.sum_sq_, x[order] ** 2)):
            # exclusive running sums within each stratum, in event order
            run = np.concatenate(([0.0], np.cumsum(values)[:-1]))
            before = np.empty_like(run)
            before[order] = total[sorted_c] + (run - run[start])
            out.append(before)
        n_before = np.empty(c.shape[0], dtype=np.int64)
        n_before[order] = self.n_[sorted_c] + np.arange(c.shape[0]) - start
        return n_before, out[0], out[1]

    def _scan(self, x: np.ndarray, c: np.ndarray) -> int | None:
        """Run the test over ``x`` (strata ``c``): the index of the first alarm (state left
        for a restart), or None with the state advanced over all of ``x``."""
        n_before, sums, sums_sq = self._before(x, c)
        # a stratum still warming up is compared with all the events (the plain test)
        cold = n_before < MIN_EVENTS
        pooled_n = int(self.n_.sum()) + np.arange(x.shape[0])
        n_before = np.where(cold, pooled_n, n_before)
        sums = np.where(cold, float(self.sum_.sum()) + np.concatenate(
            ([0.0], np.cumsum(x)[:-1])), sums)
        sums_sq = np.where(cold, float(self.sum_sq_.sum()) + np.concatenate(
            ([0.0], np.cumsum(x * x)[:-1])), sums_sq)
        ready = n_before >= MIN_EVENTS
        count = np.maximum(n_before, 1)
        mean = sums / count
        sd = np.sqrt(np.maximum(sums_sq / count - mean * mean, 0.0))
        u = np.where(ready, (mean - x) / np.maximum(sd, MIN_SD) - self.delta, 0.0)
        path = self.statistic_ + np.cumsum(u)
        low = np.minimum(self.minimum_, np.minimum.accumulate(path))
        alarms = np.flatnonzero(path - low > self.threshold)
        end = int(alarms[0]) + 1 if alarms.shape[0] else x.shape[0]
        lowest = int(np.argmin(path[:end][::-1]))  # the last minimum
        if path[end - 1 - lowest] <= self.minimum_:
            self.minimum_at_ = self.count_ + end - lowest
        if alarms.shape[0]:
            return end - 1
        self.count_ += x.shape[0]
        size = self.n_.shape[0]
        self.n_ = self.n_ + np.bincount(c, minlength=size)
        self.sum_ = self.sum_ + np.bincount(c, weights=x, minlength=size)
        self.sum_sq_ = self.sum_sq_ + np.bincount(c, weights=x * x, minlength=size)
        self.statistic_, self.minimum_ = float(path[-1]), float(low[-1])
        return None

    def status(self) -> str:
        """``drift`` within :data:`DRIFT_EVENTS` events of a detection, else ``warming_up``
        while the first :data:`MIN_EVENTS` events since a start estimate the signal, else
        ``stable``."""
        if self.last_detection_ and self.count_ - self.last_detection_ < DRIFT_EVENTS:
            return "drift"
        return "warming_up" if int(self.n_.sum()) < MIN_EVENTS else "stable"

    def get_state(self) -> State:
        """The detector's arrays, by name (saved beside the model)."""
        return {
            "count_": np.array(self.count_, dtype=np.int64),
            "detections_": np.array(self.detections_, dtype=np.int64),
            "last_detection_": np.array(self.last_detection_, dtype=np.int64),
            "n_": self.n_.copy(),
            "sum_": self.sum_.copy(),
            "sum_sq_": self.sum_sq_.copy(),
            "statistic_": np.array(self.statistic_),
            "minimum_": np.array(self.minimum_),
            "minimum_at_": np.array(self.minimum_at_, dtype=np.int64),
        }

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Replace the arrays (names as :meth:`get_state`'s, ``n_``, ``sum_`` and ``sum_sq_``
        of one length, the strata seen; a state saved without ``minimum_at_`` takes the
        event count, one saved with a single stratum as numbers is read as stratum 0)."""
        state = {"minimum_at_": state.get("count_", np.array(0)), **state}
        strata = {k: np.atleast_1d(np.asarray(state.get(k, np.zeros(0))))
                  for k in ("n_", "sum_", "sum_sq_")}
        if strata["n_"].ndim != 1 or any(v.shape != strata["n_"].shape
                                         for v in strata.values()):
            raise ParamError("state", "n_, sum_ and sum_sq_ must be vectors of one length")
        checked = check_state({k: v for k, v in self.get_state().items() if k not in strata},
                              state)
        n = strata["n_"].astype(np.int64)
        sums = {k: strata[k].astype(np.float64) for k in ("sum_", "sum_sq_")}
        if not all(np.isfinite(v).all() for v in sums.values()):
            raise ParamError("state", "sums must be finite")
        if min([int(checked[k]) for k in ("count_", "detections_", "last_detection_",
                                          "minimum_at_")] + n.tolist()) < 0:
            raise ParamError("state", "counts must be non-negative")
        self.count_, self.detections_ = int(checked["count_"]), int(checked["detections_"])
        self.last_detection_, self.n_ = int(checked["last_detection_"]), n
        self.sum_, self.sum_sq_ = sums["sum_"], sums["sum_sq_"]
        self.statistic_, self.minimum_ = float(checked["statistic_"]), float(checked["minimum_"])
        self.minimum_at_ = int(checked["minimum_at_"])
