"""Evaluations over a stream of batches, in one process or several.

An evaluation is two passes (:mod:`app.evaluation.estimators`): the reward
model's sums over the log's first
:data:`~app.evaluation.estimators.FIT_EVENTS` events, then the estimators'
sums over every event.  What is summed is the log's
:class:`~app.evaluation.sums.Kind`, which every function here is given (its
log shape's, :mod:`app.evaluation.shapes`): a label log's
:class:`~app.evaluation.estimators.LabelSums`
(:data:`app.evaluation.estimators.LABEL`), a rank log's per-slot sums
(:data:`app.evaluation.rankings.RANK`).  A log is
read as *parts* (a file's row groups, say), each a re-readable stream of
batches of events with their keys (positions in the log,
:func:`app.evaluation.sums.row_keys`); the second pass runs part by part, in
this process or in ``workers`` processes, whose accumulators merge.  The
in-memory evaluations (``evaluate(log, ...)``,
:func:`app.evaluation.rankings.evaluate_ranking`) are the same code over one
batch, so the estimates agree up to rounding whatever the batches and the
processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

import numpy as np

from app.evaluation.estimators import FIT_EVENTS, LABEL, Evaluation, LabelLog, LabelSums, Options
from app.evaluation.sums import Kind, row_keys

#: A batch of events (a label log's or a rank log's) and their keys.
Batch = tuple[Any, np.ndarray]
#: A target policy: its matrix on a batch's events (None: the logging policy).
Policy = Callable[[Any], "np.ndarray | None"]
#: Reads a part of a log as batches.
P = TypeVar("P")
Reader = Callable[[P], Iterable[Batch]]




def reward_model_sums(batches: Iterable[Batch], options: Options, limit: int = FIT_EVENTS,
                      *, kind: Kind) -> tuple[Any, int]:
    """The reward model's sums of the first ``limit`` events of ``batches`` (None without
    events) and how many events they hold."""
    sums: Any = None
    seen = 0
    for log, keys in batches:
        take = min(log.n, limit - seen)
        if take <= 0:
            break
        part = kind.reward_sums(log.rows(slice(take)), keys[:take], options)
        if sums is None:
            sums = part
        else:
            sums.merge(part)
        seen += take
    return sums, seen


def fit_reward_model(batches: Iterable[Batch], options: Options, *, kind: Kind) -> Any:
    """The reward model fitted on the first :data:`FIT_EVENTS` events of ``batches``."""
    sums, _ = reward_model_sums(batches, options, kind=kind)
    if sums is None:
        raise ValueError("the log has no events")
    return sums.fit(options.ridge)


def accumulate(batches: Iterable[Batch], policy: Policy, model: Any, options: Options,
               progress: Callable[[int], None] | None = None, *, kind: Kind) -> Any:
    """The estimators' sums over ``batches`` (``progress(k)`` as ``k`` events are added)."""
    sums = kind.zeros()
    for log, keys in batches:
        sums.add(log, policy(log), keys, options, model)
        if progress is not None:
            progress(log.n)
    return sums


def _accumulate_part(reader: Reader[P], part: P, policy: Policy, model: Any,
                     options: Options, kind: Kind) -> Any:
    return accumulate(reader(part), policy, model, options, kind=kind)


def sum_parts(parts: Sequence[P], reader: Reader[P], policy: Policy, options: Options,
              workers: int = 1, progress: Callable[[int], None] | None = None,
              *, kind: Kind) -> Any:
    """The estimators' sums of ``policy`` on the log made of ``parts`` in order (module
    docstring); ``workers`` processes share the second pass (``reader`` and ``policy``
    must then be picklable); ``progress(k)`` as ``k`` events are added."""
    model = fit_reward_model(chain(parts, reader), options, kind=kind)
    if workers <= 1 or len(parts) <= 1:
        return accumulate(chain(parts, reader), policy, model, options, progress, kind=kind)
    total = kind.zeros()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_accumulate_part, reader, part, policy, model, options, kind)
                   for part in parts]
        for future in as_completed(futures):
            if progress is not None:
                progress(future.result().n)
        for future in futures:  # in the log's order: the same sums on every run
            total.merge(future.result())
    return total


def evaluate_parts(parts: Sequence[P], reader: Reader[P], policy: Policy, options: Options,
                   workers: int = 1, progress: Callable[[int], None] | None = None
                   ) -> Evaluation:
    """IPS, SNIPS and DR of ``policy`` on the label log made of ``parts`` (:func:`sum_parts`)."""
    sums: LabelSums = sum_parts(parts, reader, policy, options, workers, progress, kind=LABEL)
    return sums.evaluation(options)


def in_batches(log: LabelLog, size: int) -> list[Batch]:
    """A log in memory as batches of ``size`` events with their keys ``0 .. n - 1``."""
    keys = row_keys(np.arange(log.n))
    return [(log.rows(slice(i, i + size)), keys[i:i + size]) for i in range(0, log.n, size)]


def chain(parts: Sequence[P], reader: Reader[P]) -> Iterator[Batch]:
    """The batches of ``parts`` in order."""
    for part in parts:
        yield from reader(part)
