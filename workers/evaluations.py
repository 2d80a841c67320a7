"""Queued policy evaluations on a model's decision log, run by the ``jobs`` role (the
``evaluation`` job kind of :mod:`workers.jobs`).

A job (``POST /v1/models/{id}/evaluations``, :mod:`app.store.evaluations`)
names a policy: ``uniform``, ``logging``, ``fixed:N``, ``model`` (the model's
current snapshot as it explores: its label distribution on each logged
context), ``model:greedy`` (its greedy label) or a configuration
``{"algorithm", "params"}``, which learns the first ``train_fraction`` of the
events and is evaluated on the rest (:mod:`app.evaluation.training`).  A log is
read, summed and scored as its model's task declares (its log shape,
:mod:`app.evaluation.shapes`: a label model's per label, a rank model's per
ranking for the ``uniform`` and ``logging`` policies), over every event
applied in ``[since, until]`` (the whole log by default), in bounded memory:
the streaming path of ``noisyloop evaluate`` (:mod:`app.evaluation.streaming`)
reads the window oldest first in chunks of :data:`CHUNK_EVENTS` events, twice
(the reward model's sums over the first events, then the estimators' sums),
each chunk's sums computed in the worker's pool (as NREst fits: off the
trainer's event loop) for at most ``nrest_timeout`` seconds and merged; where
the shape asks for it, a third pass gathers per-event columns (a label log's
weights when its effective sample size is small, a rank log's thin slots':
:meth:`app.evaluation.rankings.RankSums.thin_slots`).  Events are keyed by
their line in the window, as in the window's ``noisyloop log export``, so the
numbers are those of ``noisyloop evaluate`` on that export; a configuration's,
in the same chunks, by :mod:`workers.configevaluation`.  The result is the
JSON ``noisyloop evaluate --json`` writes.  Any error fails the job with its
reason; a job whose worker died reads as failed once its ``deadline`` passed (a
job is marked running as it is taken off the queue: :mod:`app.store.jobs`).
A rank model's clicks are corrected by the rates the request gives or else by
the model's own (:func:`ranking_rates`): its published per-slot estimate, each slot's clicks
corrected for its examination and trust bias with the estimate's errors in the
intervals, or else its current ``rho0, rho1``, flagged as the challengers'
values are when they are not reliable or an estimate whose error the intervals
leave out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson

from app.evaluation.estimators import FIT_EVENTS, Options
from app.evaluation.policies import policy_kind
from app.evaluation.rankings import RANK
from app.evaluation.rates import SlotRates
from app.evaluation.reward_model import merged
from app.evaluation.shapes import LogShape
from app.evaluation.streaming import Policy, accumulate, reward_model_sums
from app.learners.config import ModelConfig
from app.store.decisionlog import LogEntry
from app.store.jobs import QueuedJob
from app.store.keys import ModelKeys
from app.store.noise import NoiseRecord
from app.store.util import utc_now
from app.store.values import read_value_rates
from app.tasks import get_task
from workers import configevaluation, rankconfig
from workers.context import WorkerContext
from workers.logchunks import shape_batches

logger = logging.getLogger(__name__)

#: Events per chunk of a streamed evaluation (one pool call each).
CHUNK_EVENTS = 20_000
async def run_job(ctx: WorkerContext, job: QueuedJob) -> None:
    """Run one evaluation (taken: marked running) and record its result (or why it failed)
    in the job."""
    mk = job.keys
    fields = await ctx.store.evaluations.get(mk, job.job_id)
    if fields is None:  # expired
        return
    timeout = ctx.config.nrest_timeout
    try:
        result = orjson.dumps(await run(ctx, mk, orjson.loads(fields["request"]))).decode()
    except Exception as exc:  # any failure is the job's outcome, never a job left running
        error = f"took longer than {timeout:g} s" if isinstance(exc, TimeoutError) else (
            str(exc) if isinstance(exc, ValueError) else f"{exc!r}")
        log = logger.info if isinstance(exc, ValueError | TimeoutError) else logger.exception
        log("evaluation %s of %s/%s failed: %s", job.job_id, mk.tenant, mk.model, error)
        await ctx.store.evaluations.update(mk, job.job_id, status="failed", error=error,
                                           finished_at=utc_now())
        return
    await ctx.store.evaluations.update(mk, job.job_id, status="done", result=result,
                                       finished_at=utc_now())


async def run(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any]) -> dict[str, Any]:
    """The result JSON of one evaluation request (ValueError saying why there is none)."""
    config = await ctx.store.models.config(mk.tenant, mk.model)
    if config is None:
        raise ValueError("the model is gone")
    shape = get_task(config.task).log_shape
    if shape is None:
        raise ValueError(f"a {config.task!r} model's decision log is not evaluated")
    state = None
    if shape.reads_snapshot(request["policy"]):
        snap = await ctx.store.snapshots.load(mk)
        if snap is None:
            raise ValueError("the model is gone")
        state = snap.state
    if policy_kind(request["policy"]) == "configuration":
        by, flags = await _rates(ctx, mk, request, shape, config)
        if shape.kind is RANK:  # replayed progressively (the log holds the candidates)
            options = Options(**by, n_boot=request.get("bootstrap", 200))
            options.correction()
            model = await _reward_model(ctx, mk, request, shape, config, options)
            result = await rankconfig.stream_replay(
                ctx, config, shape, request, lambda: _chunks(ctx, mk, request), options, model)
        else:
            result = await configevaluation.stream_config(
                ctx, config, shape, request, lambda: _chunks(ctx, mk, request), by)
        return with_flags(result, flags)
    return await _stream(ctx, mk, config, shape, shape.policy(request["policy"], config, state),
                         request)


async def _chunks(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any]
                  ) -> AsyncIterator[list[LogEntry]]:
    """The window's entries, oldest first, in chunks of about :data:`CHUNK_EVENTS` events."""
    since_ms, until_ms = request.get("since_ms"), request.get("until_ms")
    chunk: list[LogEntry] = []
    events = 0
    async for entry in ctx.store.log.scan(
            mk, start="-" if since_ms is None else str(since_ms),
            end="+" if until_ms is None else str(until_ms)):
        chunk.append(entry)
        events += entry.size
        if events >= CHUNK_EVENTS:
            yield chunk
            chunk, events = [], 0
    if chunk:
        yield chunk


def _fit_chunk(entries: list[LogEntry], first_line: int, shape: LogShape,
               config: ModelConfig, max_cells: int, options: Options, limit: int
               ) -> tuple[Any, int, int]:
    batches, lines = shape_batches(entries, first_line, shape, config, max_cells)
    sums, seen = reward_model_sums(batches, options, limit, kind=shape.kind)
    return sums, seen, lines


def _sum_chunk(entries: list[LogEntry], first_line: int, shape: LogShape,
               config: ModelConfig, max_cells: int, policy: Policy, model: Any,
               options: Options) -> tuple[Any, int]:
    batches, lines = shape_batches(entries, first_line, shape, config, max_cells)
    return accumulate(batches, policy, model, options, kind=shape.kind), lines


def _gather_chunk(entries: list[LogEntry], first_line: int, shape: LogShape,
                  config: ModelConfig, max_cells: int, policy: Policy, need: Any
                  ) -> tuple[Any, int]:
    batches, lines = shape_batches(entries, first_line, shape, config, max_cells)
    return shape.gather(((log, policy(log)) for log, _ in batches), need), lines


async def _stream(ctx: WorkerContext, mk: ModelKeys, config: ModelConfig, shape: LogShape,
                  policy: Policy, request: dict[str, Any]) -> dict[str, Any]:
    """A log's evaluation over the whole window, streamed (module docstring)."""
    by, flags = await _rates(ctx, mk, request, shape, config)
    options = Options(**by, n_boot=request.get("bootstrap", 200))
    options.correction()  # refuse unusable rates before reading anything
    model = await _reward_model(ctx, mk, request, shape, config, options)
    total: Any = shape.kind.zeros()
    line = 0
    async for chunk in _chunks(ctx, mk, request):
        part, lines = await ctx.in_pool(functools.partial(
            _sum_chunk, chunk, line, shape, config, ctx.config.max_dense_cells, policy, model,
            options))
        total.merge(part)
        line += lines
    need = shape.third_pass(total)
    gathered = None if need is None else await _gather(ctx, mk, request, shape, config,
                                                       policy, need)
    result = await ctx.in_pool(functools.partial(shape.result, total, options, gathered))
    result = with_flags(result, flags)
    result.update(log=f"decision log of {config.model_id}", format="noisyloop",
                  policy=request["policy"], bootstrap=options.n_boot)
    return result


async def _reward_model(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any],
                        shape: LogShape, config: ModelConfig, options: Options) -> Any:
    """The reward model fitted on the window's first
    :data:`~app.evaluation.estimators.FIT_EVENTS` events (the first pass)."""
    ridge: Any = None
    line = seen = 0
    async for chunk in _chunks(ctx, mk, request):
        sums, taken, lines = await ctx.in_pool(functools.partial(
            _fit_chunk, chunk, line, shape, config, ctx.config.max_dense_cells, options,
            FIT_EVENTS - seen))
        line += lines
        seen += taken
        if sums is not None:
            ridge = merged(ridge, sums)
        if seen >= FIT_EVENTS:
            break
    if ridge is None:
        raise ValueError("the decision log: no events (is it a `noisyloop log export` file?)")
    return ridge.fit(options.ridge)


async def _rates(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any], shape: LogShape,
                 config: ModelConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rates ``shape``'s rewards are corrected by (its ``noise``) and what its result
    says of them: :func:`label_rates`, :func:`ranking_rates`, or none."""
    if shape.noise == "click":
        return await label_rates(ctx, mk, request, config)
    if shape.noise == "slots":
        return ranking_rates(request, await ctx.store.noise.get(mk))
    return {}, {}


def with_flags(result: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """``result`` with what it says of its rates (:func:`_flags`); when it is also flagged
    ``insufficient_data``, ``reason`` gives both reasons, the rates' first.

    >>> with_flags({"insufficient_data": True, "reason": "few"},
    ...            {"calibration_unreliable": True, "reason": "noise_rates_unreliable"})["reason"]
    'noise_rates_unreliable; few'
    """
    if "reason" in flags and result.get("insufficient_data"):
        return {**result, **flags, "reason": f"{flags['reason']}; {result['reason']}"}
    return {**result, **flags}


async def _gather(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any],
                  shape: LogShape, config: ModelConfig, policy: Policy, need: Any) -> Any:
    """The columns ``need`` asks for over the window, chunk by chunk, joined (a third pass:
    a label log's weights and raw clicks when its effective sample size is below
    :data:`~app.evaluation.heavy_tails.MIN_ESS`, a rank log's thin slots')."""
    parts = []
    line = 0
    async for chunk in _chunks(ctx, mk, request):
        part, lines = await ctx.in_pool(functools.partial(
            _gather_chunk, chunk, line, shape, config, ctx.config.max_dense_cells, policy,
            need))
        parts.append(part)
        line += lines
    return shape.join(parts, need)


def ranking_rates(request: dict[str, Any], noise: NoiseRecord | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rates a rank log's evaluation corrects by, as keyword arguments of
    :class:`~app.evaluation.estimators.Options`, and what its result says of them:
    ``rates`` (``request`` or ``model``), ``calibration_unreliable`` and its ``reason``.

    The request's ``rho0, rho1`` when it gives them, as every slot's click noise in the
    per-slot formula (``rho0_k = rho0``), each slot's examination ``theta_k`` the model's
    published per-slot estimate with its errors (:func:`request_slot_rates`); else the
    model's published per-slot estimate (``rates`` in ``GET .../noise``'s ``slots``), whose
    errors the intervals carry; else the model's current rates, flagged as the challengers'
    values are when they are not reliable
    (:meth:`~app.store.noise.NoiseRecord.unreliable_reason`).  Without a noise record, no
    correction, flagged.

    >>> ranking_rates({"rho0": 0.1, "rho1": 0.2}, None)[1]
    {'rates': 'request', 'calibration_unreliable': True, 'reason': 'position_bias_unknown'}
    >>> ranking_rates({}, NoiseRecord(0.0, 0.0, "initial"))[1]["reason"]
    'noise_rates_unreliable'
    """
    if request.get("rho0") is not None:
        return request_slot_rates(float(request["rho0"]), float(request["rho1"]), noise)
    if noise is None:
        return {}, {"rates": "model", "calibration_unreliable": True,
                    "reason": "noise_rates_unreliable"}
    slots = noise.published_slots
    reason = noise.unreliable_reason(errors_carried=bool(slots))
    if slots:
        rates: dict[str, Any] = {"slot_rates": SlotRates.from_slots(slots)}
    elif (noise.rho0, noise.rho1) != (0.0, 0.0):
        rates = {"rho0": noise.rho0, "rho1": noise.rho1}
    else:  # nothing to correct: said as such
        rates = {}
    return rates, _flags("model", reason)


def request_slot_rates(rho0: float, rho1: float, noise: NoiseRecord | None
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rank evaluation's rates from a request's scalar ``rho0, rho1``: every slot's
    click noise, ``P(f = 1 | k, R) = theta_k (R (1 - rho1) + (1 - R) rho0)``, with
    ``theta_k`` and its error from the model's per-slot estimate whose examination is
    published (whole, or examination alone), so that each
    slot's value is the relevance placed there.  Without a published estimate the
    examination is unknown: ``theta = 1`` everywhere (slot ``k``'s value is then
    ``theta_k R``, the click rate without the noise), flagged ``position_bias_unknown``."""
    slots = noise.examination_slots if noise else None
    if not noise or not slots:
        return ({"rho0": rho0, "rho1": rho1},
                _flags("request", "position_bias_unknown"))
    # the request's rates stand in for the estimate's (published or not): only theta is read
    est = SlotRates.from_slots([
        {"slot": s["slot"], "theta": s["theta"], "rho0": rho0, "rho1": rho1,
         "interval": {"theta": (s.get("interval") or {}).get("theta")}} for s in slots])
    m = est.slots
    rates = SlotRates(est.theta, (rho0,) * m, rho1, est.theta_se, (0.0,) * m)
    # the request's rates replace the model's, whose own reliability is then beside the point
    return {"slot_rates": rates}, _flags("request", None)


async def label_rates(ctx: WorkerContext, mk: ModelKeys, request: dict[str, Any],
                      config: ModelConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rates a label log's evaluation corrects by and what its result says of them:
    the request's ``rho0, rho1``; else the model's rates in force, with the standard errors
    of its published estimate in the intervals, flagged as the challengers' values are
    (:func:`app.store.values.read_value_rates`: one rule for both); no correction when they
    are 0 and 0."""
    if request.get("rho0") is not None:
        return {"rho0": request["rho0"], "rho1": request["rho1"]}, _flags("request", None)
    rates, reason = await read_value_rates(ctx.store, mk, True, config)
    if (rates.rho0, rates.rho1) == (0.0, 0.0):
        by: dict[str, Any] = {}
    else:
        by = {"rho0": rates.rho0, "rho1": rates.rho1, "rho0_se": rates.rho0_se,
              "rho1_se": rates.rho1_se}
    return by, _flags("model", reason)


def _flags(source: str, reason: str | None) -> dict[str, Any]:
    """What a result says of its rates: ``rates`` (``request`` or ``model``),
    ``calibration_unreliable`` and, when flagged, the ``reason``."""
    flags: dict[str, Any] = {"rates": source, "calibration_unreliable": reason is not None}
    if reason is not None:
        flags["reason"] = reason
    return flags
