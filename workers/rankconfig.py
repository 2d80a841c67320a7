"""A configuration replayed on a single-slot rank model's decision log, streamed chunk by chunk.

The steps are those of :mod:`app.evaluation.rankreplay`, driven over the window's chunks of
entries (:mod:`workers.evaluations`) oldest first, each chunk's in the worker's pool: the
replay (its learner and sums) goes into the pool with the chunk and comes back having
scored and learned its events in order.  The chunk's lines are read as the rank log's
batches (:func:`workers.logchunks.spans`) and, beside them, as the events the learner learns
(the logged context joined with its feedback, as the trainer learned them) with their times:
applied (the entry's id), joined (the event's stream id) and decided as the log tells
(:func:`~app.evaluation.rankreplay.decision_times`, with the loop's reward wait).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import numpy as np

from app.evaluation.estimators import Options
from app.evaluation.rankreplay import EventTimes, RankReplay, decision_times
from app.evaluation.reward_model import RidgeModel
from app.evaluation.shapes import LogShape
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store.decisionlog import LogEntry, LoggedEvent
from app.store.events import decode_entry
from app.store.util import parse_stream_id
from workers.context import WorkerContext
from workers.logchunks import line_events, spans


def replayed_config(config: ModelConfig, policy: dict[str, Any]) -> ModelConfig:
    """The model's config with the evaluated configuration's algorithm and params in force
    (the model's shape params kept where it does not give them)."""
    return config.updated(algorithm=policy["algorithm"],
                          params={**config.params, **policy.get("params", {})})


def _replay_chunk(entries: list[LogEntry], first_line: int, shape: LogShape,
                  config: ModelConfig, max_cells: int, replay: RankReplay
                  ) -> tuple[RankReplay, int]:
    """``replay`` once it read the chunk's events, and the chunk's lines."""
    logged = line_events(entries)
    times = line_times(entries, logged, config)
    made, lines = spans(entries, first_line, shape, config, max_cells)
    for rows, (log, keys) in made:
        kept = [i for i in rows if logged[i] is not None]
        replay.step([decode_entry(e.context, e.feedback) for e in
                     (cast(LoggedEvent, logged[i]) for i in kept)], log, keys,
                    times.rows(np.array(kept, dtype=np.int64)))
    return replay, lines


def line_times(entries: list[LogEntry], logged: list[LoggedEvent | None],
               config: ModelConfig) -> EventTimes:
    """The times of each line of ``entries`` (``logged``, their :func:`line_events`):
    applied (the entry's id), joined (the event's stream id; a marker's line, its entry's
    id) and decided as :func:`~app.evaluation.rankreplay.decision_times` reads them with
    the loop's reward wait."""
    applied = np.repeat(np.array([e.applied_ms for e in entries], dtype=np.int64),
                        [e.size for e in entries])
    joined = np.array([a if e is None else parse_stream_id(e.stream_id)[0]
                       for a, e in zip(applied.tolist(), logged, strict=True)],
                      dtype=np.int64)
    timeouts = np.array([e is not None and e.kind == "timeout" for e in logged], dtype=bool)
    decided = decision_times(timeouts, joined, 1000 * config.feedback.wait_seconds,
                             _summed(config))
    return EventTimes(decided, joined, applied)


def _summed(config: ModelConfig) -> bool:
    """Whether the loop joins every decision's rewards at its deadline (summed up to it)."""
    return config.feedback.aggregation == "sum"


def replay_lag_ms(config: ModelConfig) -> int:
    """How long before it joined a logged decision may have been made, as
    :func:`~app.evaluation.rankreplay.decision_times` reads the log: the reward wait when
    an unanswered decision teaches (or rewards are summed to the deadline), else 0."""
    waits = config.feedback.on_timeout != "drop" or _summed(config)
    return 1000 * config.feedback.wait_seconds if waits else 0


async def stream_replay(ctx: WorkerContext, config: ModelConfig, shape: LogShape,
                        request: dict[str, Any],
                        chunks: Callable[[], AsyncIterator[list[LogEntry]]],
                        options: Options, model: list[RidgeModel]) -> dict[str, Any]:
    """The result of ``request`` for a configuration on the rank model of ``config`` whose
    window ``chunks()`` reads, oldest first (module docstring), with the estimators'
    ``options`` and the slots' reward ``model`` fitted on the window's first events."""
    evaluated = replayed_config(config, request["policy"])
    replay = RankReplay(build_learner(evaluated), options, model,
                        replay_lag_ms(config))
    line = 0
    async for chunk in chunks():
        replay, lines = await ctx.in_pool(functools.partial(
            _replay_chunk, chunk, line, shape, config, ctx.config.max_dense_cells, replay))
        line += lines
    result = await ctx.in_pool(replay.result)
    result.update(log=f"decision log of {config.model_id}", format="noisyloop",
                  policy=request["policy"], bootstrap=options.n_boot)
    return result
