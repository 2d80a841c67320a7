"""A configuration's value on a single-slot rank log, replayed progressively.

A *replay* evaluates another learner configuration on the decisions a rank model logged with
every candidate's features (a ``personalizer`` loop always logs them, any rank model while
it has challengers).  A fresh learner of the configuration decides each logged decision
``i`` having learned, as they were logged and in log order, exactly the events applied
before ``i`` was decided: those the online loop's model had learned then (the log is in the
order applied; an event waits for its reward, then for the trainer's batch).  The log holds
when each event joined its feedback and was applied, not when it was decided:
:func:`decision_times` takes the reward wait before an event that timed out (or summed its
rewards up to its deadline) and the join of one whose reward came (clicks come soon after
the decision).  Learning each event at once instead would value a setting as if every reward
had come at once: above the online policy over a window that starts with the loop.  At
decision ``i`` the learner gives

    pi_i = P(it places the logged slot-0 item first | x_i, the logged candidates),

its first-slot probability under its own exploration
(:meth:`~app.learners.base.CandidateRanker.first_slot_probabilities`), averaged over the
candidates whose features equal the logged item's (``copies``: it cannot tell them apart).
This is progressive validation (Blum, Kalai & Langford 1999; the counterfactual evaluation of
Personalizer and Vowpal Wabbit's ``--cb_explore_adf`` offline runs): each event is scored
by a learner that has not seen it, so the estimate is the value of the learning policy
over the log, not of its final state.

The weights ``pi_i / mu_i`` (``mu_i`` the logged slot-0 propensity) enter the rank log's own
estimators (:class:`app.evaluation.rankings.RankSums`): IPS, SNIPS and DR of slot 0 with the
same intervals, the same click-noise correction and the same heavy-tail guard and flags as
the ``logging`` policy's evaluation of the same log.  Events that logged no candidates
(decided before the model logged them) are learned but not scored (``unscored``).  A
ranking that showed more than one slot is refused: the cascade weights of the later slots
would need the learner's placement probabilities given the logged items above, which this
replay does not compute.  Pure numpy.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from app.evaluation.estimators import Options
from app.evaluation.rankings import RankLog, RankSums, cascade_weights
from app.evaluation.reward_model import RidgeModel
from app.learners.base import CandidateRanker, Learner


def first_slot_probability(ranker: CandidateRanker, event: Mapping[str, np.ndarray]
                           ) -> float:
    """``pi_i`` of the module docstring for one logged event; NaN when it logged no
    candidates, or none with the logged slot-0 item's features."""
    if "candidates" not in event:
        return float("nan")
    rows = np.asarray(event["candidates"], dtype=np.float64)
    rows = rows[~np.isnan(rows).all(axis=1)]
    first = np.asarray(event["actions"], dtype=np.float64)[0]
    same = np.all(rows == first, axis=1)
    if not same.any():
        return float("nan")
    probs = ranker.first_slot_probabilities(np.asarray(event["x"], dtype=np.float64), rows)
    return float(probs[same].sum() / same.sum())


@dataclass(frozen=True)
class EventTimes:
    """Times of consecutive logged events (ms): when each was decided, joined its feedback
    (or expired) and was applied (its batch published, so decisions from then on were made
    by a model that had learned it)."""

    decided: np.ndarray
    joined: np.ndarray
    applied: np.ndarray

    def rows(self, rows: np.ndarray | slice) -> EventTimes:
        """The events at ``rows`` (indices or a slice)."""
        return EventTimes(self.decided[rows], self.joined[rows], self.applied[rows])


def decision_times(timeouts: np.ndarray, joined_ms: np.ndarray, wait_ms: int,
                   summed: bool) -> np.ndarray:
    """When each logged decision was made, as far as the log tells (ms): its reward wait
    before it joined (``joined_ms``) for a decision that timed out or whose rewards were
    summed up to its deadline, else when it joined (its reward came then; the log holds
    no earlier time for it).

    >>> decision_times(np.array([True, False]), np.array([9000, 9000]), 5000, False).tolist()
    [4000, 9000]
    """
    waited = np.asarray(timeouts, dtype=bool) | summed
    return np.asarray(joined_ms, dtype=np.int64) - np.where(waited, wait_ms, 0)


@dataclass
class _Part:
    """Consecutive events of the log awaiting their scores (NaN until scored)."""

    log: RankLog
    keys: np.ndarray
    pi: np.ndarray
    left: int


@dataclass
class RankReplay:
    """The replay so far (module docstring): the learner, the estimators' sums, slot 0's
    weights and raw clicks in log order (for the heavy-tail guard: two numbers per scored
    event) and the events learned and scored.

    ``lag_ms`` bounds how long before it joined a decision was made (the loop's reward
    wait): an event is scored once no event still to come can have been decided before it.
    Until then it waits in a heap keyed by its decision time, and the events read but not
    learned wait in log order (their apply times grow along the log), so the replay holds
    the events of about one reward wait and costs O(log n) per event.
    """

    learner: Learner
    options: Options
    model: list[RidgeModel]
    lag_ms: int = 0
    sums: RankSums = field(default_factory=RankSums.zeros)
    weights: list[np.ndarray] = field(default_factory=list)
    clicks: list[np.ndarray] = field(default_factory=list)
    learned: int = 0
    scored: int = 0
    _undecided: list[tuple[int, int, Mapping[str, np.ndarray], _Part, int]] = field(
        default_factory=list)
    _unlearned: deque[tuple[int, Mapping[str, np.ndarray]]] = field(default_factory=deque)
    _parts: deque[_Part] = field(default_factory=deque)
    _read: int = 0
    _horizon: int = -(2 ** 62)

    def step(self, events: Sequence[Mapping[str, np.ndarray]], log: RankLog,
             keys: np.ndarray, times: EventTimes) -> None:
        """Read consecutive events of the log: ``events`` as the learner learns them
        (logged context and feedback), ``log``, the same events as the rank log reads them,
        keyed by their positions in the log, and their ``times``; score each once no later
        event can precede it (ValueError for a ranking of more than one slot)."""
        if not len(events) == log.n == len(times.decided):
            raise ValueError("the replayed events and the rank log disagree")
        if int(log.shown.max()) > 1:
            raise ValueError("a configuration is replayed on single-slot rankings (each "
                             "event showing one action); this log shows more slots")
        part = _Part(log, keys, np.full(log.n, np.nan), log.n)
        self._parts.append(part)
        decided = np.minimum(times.decided, times.applied).tolist()
        for i, event in enumerate(events):
            heapq.heappush(self._undecided, (decided[i], self._read, event, part, i))
            self._read += 1
            self._unlearned.append((int(times.applied[i]), event))
            self._horizon = max(self._horizon, int(times.joined[i]) - self.lag_ms)
            while self._undecided and self._undecided[0][0] < self._horizon:
                self._score_next()
        self._add_scored()

    def _score_next(self) -> None:
        """Score the earliest decision not scored yet, having learned every event applied
        before it."""
        decided, _, event, part, row = heapq.heappop(self._undecided)
        while self._unlearned and self._unlearned[0][0] < decided:
            self.learner.learn_one(dict(self._unlearned.popleft()[1]))
            self.learned += 1
        part.pi[row] = first_slot_probability(cast(CandidateRanker, self.learner), event)
        part.left -= 1

    def _add_scored(self) -> None:
        """Add to the sums the oldest parts whose events are all scored, in log order."""
        while self._parts and not self._parts[0].left:
            part = self._parts.popleft()
            rows = np.flatnonzero(~np.isnan(part.pi))
            if not len(rows):
                continue
            log = part.log.rows(rows)
            target = log.propensities.copy()
            target[:, 0] = part.pi[rows]
            self.sums.add(log, target, part.keys[rows], self.options, self.model)
            self.weights.append(cascade_weights(log, target)[:, 0])
            self.clicks.append(log.clicks[:, 0])
            self.scored += len(rows)

    def finish(self) -> None:
        """Score every event still waiting and learn the rest (the log has no more)."""
        while self._undecided:
            self._score_next()
        while self._unlearned:
            self.learner.learn_one(dict(self._unlearned.popleft()[1]))
            self.learned += 1
        self._add_scored()

    def result(self) -> dict[str, Any]:
        """The evaluation's JSON (:meth:`app.evaluation.rankings.RankSums.result`) once
        every event read is scored (:meth:`finish`), with ``replay``: the events learned,
        scored and not scored (ValueError when none was scored)."""
        self.finish()
        if not self.scored:
            raise ValueError("no event of the log holds its candidates' features: a "
                             "configuration is replayed on rankings logged with every "
                             "candidate (a personalizer loop's, or a model's with "
                             "challengers)")
        columns = {}
        if self.sums.thin_slots():
            columns[0] = (np.concatenate(self.weights), np.concatenate(self.clicks))
        out = self.sums.result(self.options, columns)
        out["replay"] = {"learned": self.learned, "scored": self.scored,
                         "unscored": self.learned - self.scored}
        return out
