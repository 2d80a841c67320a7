"""A configuration's evaluation on a log read in batches, in bounded memory.

A configuration ``{"algorithm", "params"}`` learns the first ``train`` of
the log's events and is evaluated on the rest (:mod:`app.evaluation.training`).
What differs between logs is the log's shape's
(:class:`~app.evaluation.shapes.ConfigShape`: the feedback its events hold,
the params a configuration takes from the evaluated model, the trained
learner's policy, the estimators' sums and result); this code names none.
The log is read as consecutive batches of events (markers are not
events) with their stream ids, over three passes:

1. the caller counts the events, which fixes the split (:class:`ConfigPlan`;
   events appended after the count are left out);
2. :class:`ConfigRun` has the learner learn the first ``train`` events batch by
   batch in log order (:class:`app.evaluation.training.Training`: the steps of
   the log in memory, whatever the batches) while the reward model's sums are
   taken over the first :data:`~app.evaluation.estimators.FIT_EVENTS`
   evaluated events;
3. :class:`ConfigScorer` sums the estimators (the shape's
   :class:`~app.evaluation.sums.Kind`) over the evaluated events under the
   trained learner's policy; when the shape asks for a third pass (a label
   log below :data:`~app.evaluation.heavy_tails.MIN_ESS` effective events),
   it gathers the evaluated events' columns.

Evaluated events are keyed by their place among the evaluated ones, as the
log in memory keys them (:func:`app.evaluation.estimators.evaluate`), so the
numbers are those of :func:`app.evaluation.training.config_policy` followed
by ``evaluate`` on the whole log, up to rounding.  The command line drives
the passes over a file's batches (:func:`evaluate_config`); the service's
evaluation jobs drive the same steps chunk by chunk in their process pool.
Pure numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.evaluation.estimators import FIT_EVENTS, Options
from app.evaluation.shapes import ConfigShape
from app.evaluation.streaming import accumulate
from app.evaluation.sums import FitSums, row_keys
from app.evaluation.training import Training, split_fields, start_training, train_size
from app.learners.base import Learner

#: A batch of consecutive events (a label log's, a continuous log's) and the stream id of
#: each.
EventBatch = tuple[Any, Sequence[str]]


@dataclass(frozen=True)
class ConfigPlan:
    """What every pass of a configuration's evaluation needs (picklable)."""

    config: Any
    task: str
    """The task whose learner ``config`` names (the evaluated model's)."""
    shape: ConfigShape
    """The log's shape."""
    n_classes: int | None
    options: Options
    """The estimators' options; their ``seed`` seeds the learner too, their rates (when
    both are given) are the learner's click-noise rates."""
    events: int
    """The log's events when they were counted."""
    train: int
    """The first ``train`` of them are learned from, the rest evaluated."""
    inherited: Mapping[str, Any] = field(default_factory=dict)
    """The evaluated model's params the configuration learns with
    (:meth:`~app.evaluation.shapes.ConfigShape.inherited`)."""

    @classmethod
    def of(cls, config: Any, task: str, n_classes: int | None, options: Options, events: int,
           train_fraction: float, *, shape: ConfigShape,
           inherited: Mapping[str, Any] | None = None) -> ConfigPlan:
        """The plan splitting ``events`` events of a log of ``shape`` at ``train_fraction``
        (ValueError when a part would be empty, or for rates that cannot be used)."""
        options.correction()  # refuse unusable rates before reading the log again
        return cls(config, task, shape, n_classes, options, events,
                   train_size(events, train_fraction), dict(inherited or {}))

    @property
    def rates(self) -> tuple[float, float] | None:
        """The learner's click-noise rates (None unless both are given)."""
        o = self.options
        return None if o.rho0 is None or o.rho1 is None else (o.rho0, o.rho1)

    @property
    def fit_stop(self) -> int:
        """The end of the events the reward model is fitted on (those evaluated first)."""
        return min(self.events, self.train + FIT_EVENTS)

    @property
    def ends(self) -> tuple[int, int, int, int]:
        """The first and last event learned from, and the first and last evaluated."""
        return 0, self.train - 1, self.train, self.events - 1

    def ids_in(self, stream_ids: Sequence[str], position: int) -> dict[int, str]:
        """The stream ids of :attr:`ends` among a batch's (its first event at ``position``)."""
        return {i: stream_ids[i - position] for i in self.ends
                if position <= i < position + len(stream_ids)}

    def result(self, total: Any, learned: int, ids: Mapping[int, str],
               gathered: Any = None) -> dict[str, Any]:
        """The evaluation's JSON (the shape's, of the summed evaluated events and what its
        third pass ``gathered``, if it asked for one) with its ``split`` (ValueError when an
        end of the split was not read: the log lost events while it was read)."""
        if any(i not in ids for i in self.ends):
            raise ValueError("the log lost events while it was read")
        out = self.shape.result(total, self.options, gathered)
        out["split"] = split_fields(learned, out["n"], [ids[i] for i in self.ends])
        return out


@dataclass
class ConfigRun:
    """The learning pass (module docstring, 2): the learner so far, the reward model's sums
    so far, the events learned and the split's stream ids seen."""

    plan: ConfigPlan
    training: Training | None = None
    ridge: FitSums | None = None
    learned: int = 0
    ids: dict[int, str] = field(default_factory=dict)

    def learn(self, log: Any, stream_ids: Sequence[str], position: int) -> int:
        """Take the batch whose first event is the log's ``position``-th (events past
        :attr:`ConfigPlan.fit_stop` are left alone); the events it learned from."""
        plan = self.plan
        take = min(log.n, plan.fit_stop - position)
        if take <= 0:
            return 0
        log = log.rows(slice(take))
        self.ids.update(plan.ids_in(stream_ids[:log.n], position))
        learn = min(log.n, max(plan.train - position, 0))
        if learn:
            if self.training is None:
                self.training = start_training(
                    plan.config, plan.task, log.X.shape[1], plan.n_classes, plan.rates,
                    plan.options.seed, feedback=plan.shape.feedback, inherited=plan.inherited)
            self.training.learn(log.rows(slice(learn)))
            self.learned += learn
        if learn < log.n:
            first = position + learn - plan.train  # its place among the evaluated events
            keys = row_keys(np.arange(first, first + log.n - learn))
            part = plan.shape.kind.reward_sums(log.rows(slice(learn, None)), keys,
                                               plan.options)
            if self.ridge is None:
                self.ridge = part
            else:
                self.ridge.merge(part)
        return learn

    def scorer(self) -> ConfigScorer:
        """The trained learner and the fitted reward model (ValueError without events on
        either side)."""
        if self.training is None or self.ridge is None:
            raise ValueError("the log lost its events while it was read")
        return ConfigScorer(self.plan, self.training.finish(),
                            self.ridge.fit(self.plan.options.ridge))


@dataclass(frozen=True)
class ConfigScorer:
    """The scoring pass (module docstring, 3)."""

    plan: ConfigPlan
    learner: Learner
    model: Any
    """The fitted reward model (the shape's)."""

    def score(self, log: Any, stream_ids: Sequence[str], position: int
              ) -> tuple[Any, dict[int, str]]:
        """The estimators' sums of the batch's evaluated events (its first event the log's
        ``position``-th) and the split's stream ids among them."""
        plan = self.plan
        start, stop = self._evaluated(log, position)
        if stop <= start:
            return plan.shape.kind.zeros(), {}
        first = position + start - plan.train
        batch = (log.rows(slice(start, stop)), row_keys(np.arange(first, first + stop - start)))
        return (accumulate([batch], self.policy, self.model, plan.options,
                           kind=plan.shape.kind),
                plan.ids_in(stream_ids[start:stop], position + start))

    def policy(self, log: Any) -> np.ndarray | None:
        """The trained learner's policy on each event of ``log`` (as its shape scores it)."""
        return self.plan.shape.trained(self.learner)(log)

    def columns(self, log: Any, position: int, need: Any) -> Any:
        """What the shape's third pass gathers (``need``) of the batch's evaluated events
        (its first event the log's ``position``-th; None when it holds none)."""
        start, stop = self._evaluated(log, position)
        if stop <= start:
            return None
        part = log.rows(slice(start, stop))
        return self.plan.shape.gather([(part, self.policy(part))], need)

    def _evaluated(self, log: Any, position: int) -> tuple[int, int]:
        """The rows of the batch's evaluated events (its first event the log's
        ``position``-th)."""
        return (max(self.plan.train - position, 0),
                min(self.plan.events - position, log.n))


def evaluate_config(plan: ConfigPlan, batches: Callable[[], Iterable[EventBatch]],
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The result of ``plan`` (its evaluation and ``split``) on the log ``batches()`` reads
    (twice), oldest first; ``progress(k)`` as ``k`` events are learned or evaluated."""
    step = progress or (lambda k: None)
    run = ConfigRun(plan)
    position = 0
    for log, stream_ids in batches():
        step(run.learn(log, stream_ids, position))
        position += log.n
        if position >= plan.fit_stop:
            break
    scorer = run.scorer()
    total, ids = plan.shape.kind.zeros(), dict(run.ids)
    position = 0
    for log, stream_ids in batches():
        sums, found = scorer.score(log, stream_ids, position)
        total.merge(sums)
        ids.update(found)
        step(sums.n)
        position += log.n
        if position >= plan.events:
            break
    need = plan.shape.third_pass(total)
    gathered = None if need is None else plan.shape.join(
        [part for log, start in _positions(batches(), plan.events)
         if (part := scorer.columns(log, start, need)) is not None], need)
    return plan.result(total, run.learned, ids, gathered)


def _positions(batches: Iterable[EventBatch], events: int) -> Iterator[tuple[Any, int]]:
    """Each batch's events and the log's position of its first, up to ``events``."""
    position = 0
    for log, _ in batches:
        yield log, position
        position += log.n
        if position >= events:
            return

