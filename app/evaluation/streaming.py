"""Label evaluations over a stream of batches, in one process or several.

A label evaluation is two passes (:mod:`app.evaluation.estimators`): the
reward model's sums over the log's first
:data:`~app.evaluation.estimators.FIT_EVENTS` events, then the estimators'
sums (:class:`~app.evaluation.estimators.LabelSums`) over every event.  A
log is read as *parts* (a file's row groups, say), each a re-readable
stream of batches of events with their keys (positions in the log,
:func:`app.evaluation.sums.row_keys`); the second pass runs part by part,
in this process or in ``workers`` processes, whose accumulators merge.
``evaluate(log, ...)`` is the same code over one batch, so the estimates
agree up to rounding whatever the batches and the processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

import numpy as np

from app.evaluation.estimators import (
    FIT_EVENTS,
    Evaluation,
    LabelLog,
    LabelSums,
    Options,
    reward_sums,
)
from app.evaluation.reward_model import RidgeModel, RidgeSums
from app.evaluation.sums import row_keys

#: A batch of events and their keys.
Batch = tuple[LabelLog, np.ndarray]
#: A target policy: its ``n x K`` matrix on a batch's events (None: the logging policy).
Policy = Callable[[LabelLog], "np.ndarray | None"]
#: Reads a part of a log as batches.
P = TypeVar("P")
Reader = Callable[[P], Iterable[Batch]]


def reward_model_sums(batches: Iterable[Batch], options: Options, limit: int = FIT_EVENTS
                      ) -> tuple[RidgeSums | None, int]:
    """The reward model's sums of the first ``limit`` events of ``batches`` (None without
    events) and how many events they hold."""
    sums: RidgeSums | None = None
    seen = 0
    for log, keys in batches:
        take = min(log.n, limit - seen)
        if take <= 0:
            break
        part = reward_sums(log.rows(slice(take)), keys[:take], options)
        if sums is None:
            sums = part
        else:
            sums.merge(part)
        seen += take
    return sums, seen


def fit_reward_model(batches: Iterable[Batch], options: Options) -> RidgeModel:
    """The reward model fitted on the first :data:`FIT_EVENTS` events of ``batches``."""
    sums, _ = reward_model_sums(batches, options)
    if sums is None:
        raise ValueError("the log has no events")
    return sums.fit(options.ridge)


def accumulate(batches: Iterable[Batch], policy: Policy, model: RidgeModel,
               options: Options, progress: Callable[[int], None] | None = None) -> LabelSums:
    """The estimators' sums over ``batches`` (``progress(k)`` as ``k`` events are added)."""
    sums = LabelSums.zeros()
    for log, keys in batches:
        sums.add(log, policy(log), keys, options, model)
        if progress is not None:
            progress(log.n)
    return sums


def _accumulate_part(reader: Reader[P], part: P, policy: Policy, model: RidgeModel,
                     options: Options) -> LabelSums:
    return accumulate(reader(part), policy, model, options)


def evaluate_parts(parts: Sequence[P], reader: Reader[P], policy: Policy, options: Options,
                   workers: int = 1, progress: Callable[[int], None] | None = None
                   ) -> Evaluation:
    """IPS, SNIPS and DR of ``policy`` on the log made of ``parts`` in order (module
    docstring); ``workers`` processes share the second pass (``reader`` and ``policy``
    must then be picklable); ``progress(k)`` as ``k`` events are added."""
    model = fit_reward_model(_chain(parts, reader), options)
    if workers <= 1 or len(parts) <= 1:
        total = accumulate(_chain(parts, reader), policy, model, options, progress)
    else:
        total = LabelSums.zeros()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_accumulate_part, reader, part, policy, model, options)
                       for part in parts]
            for future in as_completed(futures):
                if progress is not None:
                    progress(int(future.result().sums.totals[0]))
            for future in futures:  # in the log's order: the same sums on every run
                total.merge(future.result())
    return total.evaluation(options)


def in_batches(log: LabelLog, size: int) -> list[Batch]:
    """A log in memory as batches of ``size`` events with their keys ``0 .. n - 1``."""
    keys = row_keys(np.arange(log.n))
    return [(log.rows(slice(i, i + size)), keys[i:i + size]) for i in range(0, log.n, size)]


def _chain(parts: Sequence[P], reader: Reader[P]) -> Iterator[Batch]:
    for part in parts:
        yield from reader(part)
