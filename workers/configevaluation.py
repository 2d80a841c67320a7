"""A configuration's evaluation on a model's decision log, streamed in bounded memory.

The steps are those of :mod:`app.evaluation.configrun` (the code of
``noisyloop evaluate --policy config:...``), driven over the window's chunks
of entries (:mod:`workers.evaluations`), oldest first, each chunk's step in
the worker's pool: the window is read once to count its events (which fixes
the split; events appended after the count are left out), once to train the
learner while the reward model's sums are taken over the evaluated events,
and once to sum the estimators over those.  Evaluated events are keyed by
their place among the evaluated ones, so the numbers are those of
``noisyloop evaluate --policy config:...`` on the window's export.  What differs
between logs (how events are read, the estimators' sums, the trained policy, a
third pass) is the log shape's (:class:`~app.evaluation.shapes.ConfigShape`);
this module names none.  A chunk's events are made dense a span at a time
(the worker's ``max_dense_cells``): a wide model's chunk never holds its whole
width per event at once.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, cast

from app.evaluation.configrun import ConfigPlan, ConfigRun, ConfigScorer
from app.evaluation.estimators import Options
from app.evaluation.servicelog import record_width
from app.evaluation.shapes import ConfigShape, LogShape
from app.evaluation.training import DEFAULT_TRAIN_FRACTION
from app.features import row_spans
from app.learners.config import ModelConfig
from app.store.decisionlog import LogEntry
from app.store.logrecords import entry_records
from workers.context import WorkerContext


def _events(entries: list[LogEntry]) -> int:
    """The events of ``entries`` (markers are not events)."""
    return sum(entry.size for entry in entries if not entry.is_marker)


def _event_logs(entries: list[LogEntry], first: int, stop: int, plan: ConfigPlan,
                config: ModelConfig, max_cells: int
                ) -> Iterator[tuple[int, tuple[Any, tuple[str, ...]]]]:
    """Events ``first`` to ``stop - 1`` of ``entries`` (counted without markers) as logs of
    the plan's shape with their stream ids, each with the index of its first event among
    them: consecutive spans made dense one at a time, a span's rows and their stack at most
    ``max_cells`` float64 (the worker's ``max_dense_cells``)."""
    records: list[dict[str, Any]] = []
    for entry in entries:
        if entry.is_marker:
            continue
        if first < entry.size and stop > 0:
            records += entry_records(entry, max(first, 0), stop - max(first, 0))
        first, stop = first - entry.size, stop - entry.size
    for rows in row_spans(len(records), 2 * record_width(records), max_cells):
        yield rows.start, plan.shape.identified(records[rows.start:rows.stop], config,
                                                "the decision log")


def _learn_chunk(entries: list[LogEntry], position: int, config: ModelConfig,
                 max_cells: int, run: ConfigRun) -> ConfigRun:
    """``run`` once it took the chunk's events from ``position`` on (up to the end of the
    reward model's events)."""
    for offset, (log, stream_ids) in _event_logs(entries, 0, run.plan.fit_stop - position,
                                                 run.plan, config, max_cells):
        run.learn(log, stream_ids, position + offset)
    return run


def _score_chunk(entries: list[LogEntry], position: int, config: ModelConfig,
                 max_cells: int, scorer: ConfigScorer) -> tuple[Any, dict[int, str]]:
    """The estimators' sums of the chunk's evaluated events (the chunk's first event the
    window's ``position``-th) and the split's stream ids among them."""
    plan = scorer.plan
    total, ids = plan.shape.kind.zeros(), {}
    for offset, (log, stream_ids) in _event_logs(entries, plan.train - position,
                                                 plan.events - position, plan, config,
                                                 max_cells):
        sums, found = scorer.score(log, stream_ids, max(position, plan.train) + offset)
        total.merge(sums)
        ids.update(found)
    return total, ids


def _columns_chunk(entries: list[LogEntry], position: int, config: ModelConfig,
                   max_cells: int, scorer: ConfigScorer, need: Any) -> list[Any]:
    """What the shape's third pass gathers (``need``) of the chunk's evaluated events (as
    :func:`_score_chunk` reads them), per span."""
    plan = scorer.plan
    parts = (scorer.columns(log, max(position, plan.train) + offset, need)
             for offset, (log, _) in _event_logs(entries, plan.train - position,
                                                 plan.events - position, plan, config,
                                                 max_cells))
    return [part for part in parts if part is not None]


async def stream_config(ctx: WorkerContext, config: ModelConfig, shape: LogShape,
                        request: dict[str, Any],
                        chunks: Callable[[], AsyncIterator[list[LogEntry]]],
                        rates: Mapping[str, Any]) -> dict[str, Any]:
    """The result of ``request`` for a configuration on the model of ``config``, whose log
    is of ``shape`` (ValueError unless its policies take a ``configuration``) and whose
    window ``chunks()`` reads, oldest first, in chunks of entries (module docstring),
    corrected by ``rates`` (keyword arguments of :class:`~app.evaluation.estimators.Options`;
    the learner learns at them too); when the shape asks for a third pass (a label log below
    :data:`~app.evaluation.heavy_tails.MIN_ESS` effective events) a fourth pass reads what
    it gathers (the evaluated events' weights and clicks for the heavy-tail guard)."""
    if "configuration" not in shape.policies:
        raise ValueError(f"a {config.task!r} model's log is not evaluated for a "
                         "configuration")
    configurable = cast(ConfigShape, shape)
    options = Options(**rates, n_boot=request.get("bootstrap", 200))
    options.correction()  # refuse unusable rates before reading anything
    fraction = request.get("train_fraction") or DEFAULT_TRAIN_FRACTION
    events = 0
    async for chunk in chunks():
        events += _events(chunk)
    plan = ConfigPlan.of(request["policy"], config.task, config.n_classes, options,
                         events, fraction, shape=configurable,
                         inherited=configurable.inherited(config))
    run = ConfigRun(plan)
    position = 0
    async for chunk in chunks():
        run = await ctx.in_pool(functools.partial(
            _learn_chunk, chunk, position, config, ctx.config.max_dense_cells, run))
        position += _events(chunk)
        if position >= plan.fit_stop:
            break
    scorer = await ctx.in_pool(run.scorer)
    total, ids = plan.shape.kind.zeros(), dict(run.ids)
    position = 0
    async for chunk in chunks():
        count = _events(chunk)
        if position + count > plan.train:
            part, found = await ctx.in_pool(functools.partial(
                _score_chunk, chunk, position, config, ctx.config.max_dense_cells, scorer))
            total.merge(part)
            ids.update(found)
        position += count
        if position >= plan.events:
            break
    need = plan.shape.third_pass(total)
    gathered = None
    if need is not None:
        parts: list[Any] = []
        position = 0
        async for chunk in chunks():
            count = _events(chunk)
            if position + count > plan.train:
                parts += await ctx.in_pool(functools.partial(
                    _columns_chunk, chunk, position, config, ctx.config.max_dense_cells,
                    scorer, need))
            position += count
            if position >= plan.events:
                break
        gathered = plan.shape.join(parts, need)
    result = await ctx.in_pool(functools.partial(plan.result, total, run.learned, ids,
                                                 gathered))
    result.update(log=f"decision log of {config.model_id}", format="noisyloop",
                  policy=request["policy"], bootstrap=options.n_boot, train_fraction=fraction)
    return result
