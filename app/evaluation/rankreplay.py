"""A configuration's value on a single-slot rank log, replayed progressively.

A *replay* evaluates another learner configuration on the decisions a rank model logged with
every candidate's features (a ``personalizer`` loop always logs them, any rank model while
it has challengers).  The events are replayed in log order; at event ``i`` a fresh learner
of the configuration, having learned events ``0 .. i - 1`` as they were logged, gives

    pi_i = P(it places the logged slot-0 item first | x_i, the logged candidates),

its first-slot probability under its own exploration
(:meth:`~app.learners.base.CandidateRanker.first_slot_probabilities`), averaged over the
candidates whose features equal the logged item's (``copies``: it cannot tell them apart);
then it learns event ``i`` as the model did (its logged context and feedback).  This is
progressive validation (Blum, Kalai & Langford 1999; the counterfactual evaluation of
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


@dataclass
class RankReplay:
    """The replay so far (module docstring): the learner, the estimators' sums, slot 0's
    weights and raw clicks in log order (for the heavy-tail guard: two numbers per scored
    event) and the events learned and scored."""

    learner: Learner
    options: Options
    model: list[RidgeModel]
    sums: RankSums = field(default_factory=RankSums.zeros)
    weights: list[np.ndarray] = field(default_factory=list)
    clicks: list[np.ndarray] = field(default_factory=list)
    learned: int = 0
    scored: int = 0

    def step(self, events: Sequence[Mapping[str, np.ndarray]], log: RankLog,
             keys: np.ndarray) -> None:
        """Score, then learn, consecutive events: ``events`` as the learner learns them
        (logged context and feedback) and ``log``, the same events as the rank log reads
        them, keyed by their positions in the log (ValueError for a ranking of more than
        one slot)."""
        if len(events) != log.n:
            raise ValueError("the replayed events and the rank log disagree")
        if int(log.shown.max()) > 1:
            raise ValueError("a configuration is replayed on single-slot rankings (each "
                             "event showing one action); this log shows more slots")
        ranker = cast(CandidateRanker, self.learner)
        pi = np.empty(log.n)
        for i, event in enumerate(events):
            pi[i] = first_slot_probability(ranker, event)
            self.learner.learn_one(dict(event))
        self.learned += log.n
        rows = np.flatnonzero(~np.isnan(pi))
        if not len(rows):
            return
        part = log.rows(rows)
        target = part.propensities.copy()
        target[:, 0] = pi[rows]
        self.sums.add(part, target, keys[rows], self.options, self.model)
        self.weights.append(cascade_weights(part, target)[:, 0])
        self.clicks.append(part.clicks[:, 0])
        self.scored += len(rows)

    def result(self) -> dict[str, Any]:
        """The evaluation's JSON (:meth:`app.evaluation.rankings.RankSums.result`), with
        ``replay``: the events learned, scored and not scored (ValueError when none was
        scored)."""
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
