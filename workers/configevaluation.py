"""A configuration's evaluation on a model's decision log, streamed in bounded memory.

A configuration ``{"algorithm", "params"}`` learns the first
``train_fraction`` of the window's events and is evaluated on the rest
(:mod:`app.evaluation.training`).  The window is read three times, in the
chunks of :mod:`workers.evaluations`: to count its events (which fixes the
split; events appended after the count are left out), to train the learner
chunk by chunk in log order (:class:`app.evaluation.training.Training`,
in the steps of the whole log in memory) while the reward model's sums are
taken over the evaluated events, and to sum the estimators over those
(:class:`app.evaluation.estimators.LabelSums`), each chunk in the worker's
pool.  Evaluated events are keyed by their place among the evaluated ones,
as ``noisyloop evaluate --policy config:...`` keys them, so the numbers are
those of that command on the window's export.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.evaluation.estimators import FIT_EVENTS, LabelSums, Options, reward_sums
from app.evaluation.policies import learner_policy
from app.evaluation.reward_model import RidgeModel, RidgeSums, merged
from app.evaluation.servicelog import ServiceLog, service_log
from app.evaluation.streaming import accumulate
from app.evaluation.sums import row_keys
from app.evaluation.training import (
    DEFAULT_TRAIN_FRACTION,
    Training,
    split_fields,
    start_training,
    train_size,
)
from app.learners.base import Learner
from app.store.decisionlog import LogEntry
from app.store.logrecords import entry_records
from app.tasks import get_task
from workers.context import WorkerContext


@dataclass(frozen=True)
class _ConfigPlan:
    """What every chunk of a configuration's evaluation needs (a pool call's argument)."""

    config: Any
    n_classes: int
    options: Options
    rates: tuple[float, float] | None
    events: int
    """The window's events when they were counted."""
    train: int
    """The first ``train`` of them are learned from, the rest evaluated."""

    @property
    def fit_stop(self) -> int:
        """The end of the events the reward model is fitted on (those evaluated first)."""
        return min(self.events, self.train + FIT_EVENTS)


def _events(entries: list[LogEntry]) -> int:
    """The events of ``entries`` (markers are not events)."""
    return sum(entry.size for entry in entries if not entry.is_marker)


def _event_log(entries: list[LogEntry], first: int, stop: int, n_classes: int
               ) -> ServiceLog | None:
    """Events ``first`` to ``stop - 1`` of ``entries`` (counted without markers) as a label
    log; None when there are none."""
    records: list[dict[str, Any]] = []
    for entry in entries:
        if entry.is_marker:
            continue
        if first < entry.size and stop > 0:
            records += entry_records(entry, max(first, 0), stop - max(first, 0))
        first, stop = first - entry.size, stop - entry.size
    return service_log(records, n_classes, "the decision log") if records else None


def _learn_chunk(entries: list[LogEntry], position: int, training: Training | None,
                 plan: _ConfigPlan
                 ) -> tuple[Training | None, RidgeSums | None, tuple[str, str] | None]:
    """The chunk of events from ``position`` on: its events among the first ``plan.train``
    learned (the training started on the first chunk), the reward model's sums of the
    others (up to ``plan.fit_stop``), and the stream ids of the first and last learned."""
    read = _event_log(entries, 0, plan.fit_stop - position, plan.n_classes)
    if read is None:
        return training, None, None
    log = read.label_log()
    learn = min(log.n, max(plan.train - position, 0))
    ids = None
    if learn:
        if training is None:
            training = start_training(plan.config, log.X.shape[1], plan.n_classes,
                                      plan.rates)
        training.learn(log.rows(slice(learn)))
        ids = read.stream_ids[0], read.stream_ids[learn - 1]
    if learn == log.n:
        return training, None, ids
    first = position + learn - plan.train  # its place among the evaluated events
    keys = row_keys(np.arange(first, first + log.n - learn))
    return training, reward_sums(log.rows(slice(learn, None)), keys, plan.options), ids


def _score_chunk(entries: list[LogEntry], position: int, learner: Learner,
                 model: RidgeModel, plan: _ConfigPlan
                 ) -> tuple[LabelSums, tuple[str, str] | None]:
    """The estimators' sums of the chunk's evaluated events (from ``position`` on) under the
    trained learner's policy, and the stream ids of the first and last of them."""
    read = _event_log(entries, plan.train - position, plan.events - position, plan.n_classes)
    if read is None:
        return LabelSums.zeros(), None
    log = read.label_log()
    first = max(position, plan.train) - plan.train
    policy = functools.partial(learner_policy, learner=learner)
    batch = (log, row_keys(np.arange(first, first + log.n)))
    ends = read.stream_ids[0], read.stream_ids[-1]
    return accumulate([batch], policy, model, plan.options), ends


async def stream_config(ctx: WorkerContext, config: dict[str, Any], request: dict[str, Any],
                        chunks: Callable[[], AsyncIterator[list[LogEntry]]]) -> dict[str, Any]:
    """The result of ``request`` for a configuration on the model of ``config``, whose
    window ``chunks()`` reads, oldest first, in chunks of entries (module docstring)."""
    if get_task(config["task"]).candidates or not config.get("n_classes"):
        raise ValueError("a configuration is evaluated on a label model's log")
    options = Options(request.get("rho0"), request.get("rho1"),
                      n_boot=request.get("bootstrap", 200))
    options.correction()  # refuse unusable rates before reading anything
    fraction = request.get("train_fraction") or DEFAULT_TRAIN_FRACTION
    events = 0
    async for chunk in chunks():
        events += _events(chunk)
    rates = None if request.get("rho0") is None else (request["rho0"], request["rho1"])
    plan = _ConfigPlan(request["policy"], int(config["n_classes"]), options, rates, events,
                       train_size(events, fraction))
    training: Training | None = None
    ridge: RidgeSums | None = None
    first_ids: tuple[str, str] | None = None
    position = 0
    async for chunk in chunks():
        training, sums, ids = await ctx.in_pool(functools.partial(
            _learn_chunk, chunk, position, training, plan))
        position += _events(chunk)
        if ids is not None:
            first_ids = ids if first_ids is None else (first_ids[0], ids[1])
        if sums is not None:
            ridge = merged(ridge, sums)
        if position >= plan.fit_stop:
            break
    if training is None or ridge is None or first_ids is None:
        raise ValueError("the decision log: the window lost its events while it was read")
    learned = min(position, plan.train)
    learner = await ctx.in_pool(training.finish)
    model = ridge.fit(options.ridge)
    total = LabelSums.zeros()
    last_ids: tuple[str, str] | None = None
    position = 0
    async for chunk in chunks():
        count = _events(chunk)
        if position + count > plan.train:
            part, ids = await ctx.in_pool(functools.partial(
                _score_chunk, chunk, position, learner, model, plan))
            total.merge(part)
            if ids is not None:
                last_ids = ids if last_ids is None else (last_ids[0], ids[1])
        position += count
        if position >= plan.events:
            break
    result = (await ctx.in_pool(functools.partial(total.evaluation, options))).to_dict()
    assert last_ids is not None  # (evaluation raises without evaluated events)
    result.update(log=f"decision log of {config['model_id']}", format="noisyloop",
                  policy=request["policy"], bootstrap=options.n_boot, train_fraction=fraction,
                  split=split_fields(learned, result["n"], (*first_ids, *last_ids)))
    return result
