"""The noise estimator: re-estimates the click-noise rates rho0, rho1 of the models that learn them.

Each model names its ``estimator`` (:class:`app.store.nrest.EstimatorSettings`):
``anchor`` (the default), ``nrest`` or ``fixed`` (never re-estimated).  A
periodic refresh and a requested one (``POST .../noise/estimate``, queued as a
job) take one path, :func:`refresh`: the model's own estimator, and its rates
published by the one rule of :mod:`app.learners.noise_publish`; otherwise the
model keeps its rates and the outcome (``insufficient_data``, the reason and
the counts) is recorded for ``GET .../noise`` (and, for a request, in its job).
Neither replaces rates configured by hand unless the estimate is part of the
algorithm (``owns_noise_estimate``).

**anchor** (:func:`estimate_anchors`): every model whose learner uses noise
rates and learns from one click per played label.  The trainer keeps
``(propensity, out-of-sample score, click)`` of every observed play
(:mod:`workers.anchors`); every
:data:`~app.learners.noise_publish.ANCHOR_EVERY` new plays, or
``nrest_interval`` seconds with some new plays, the anchor estimate
(:func:`~app.learners.noise_publish.anchor_estimate`) runs on the newest
:data:`~app.learners.noise_publish.ANCHOR_BUFFER` plays in the process pool.
Its rates replace the model's only when published (both intervals at most the
model's ``max_width`` wide, one right label per input stated by the learner's setting
or the model's owner); an estimate refused because its assumptions fail or
cannot be shown (:func:`~app.learners.noise_publish.withdraws`) withdraws the
published one in force: its rates stay, flagged
(:attr:`~app.store.noise.NoiseRecord.withdrawn`), until one is published again.
For a model whose learner logs its placements (rank models) the rows are its shown
slots and the estimate is the per-slot one
(:func:`~app.learners.noise_publish.slot_estimate`): published, it stores slot 0's
``rho0``, ``rho1`` and every slot's ``theta``, ``rho0``, ``rho1``; its examination
alone passing its own gate, every slot's ``theta`` (flagged: the rates stay) while
nothing published whole is in force.

**nrest** (the paper's estimator, :func:`estimate`): models whose learner class
declares ``keeps_noise_samples`` (:mod:`app.learners.base`).  For these the
trainer appends the logged ``(x, played label, noisy click)`` of every applied
feedback event (not the sweeper's default no-click events, which were never
observed) to a capped sample buffer (the class's ``noise_samples`` of the
model's params, else the worker's ``nrest_buffer``); a refresh is due after
that many new samples, or ``nrest_interval`` seconds with some new samples.
The fit (:func:`~app.learners.noise_publish.nrest_estimate`, with the model's
``percentile`` and ``beta_min``) runs in the worker's process pool, never on
the event loop; a successful fit is published (NREst gives no interval).

The jobs role (:mod:`workers.jobs`) runs a requested estimate with :func:`run_job`
(the ``noise_estimate`` job kind) and, once its queues are empty, every model due
for a periodic run with :func:`run_periodic`.  That looks only at
the models on the noise due set (:mod:`app.store.dueset`): the trainer puts a model there
when it adds samples or anchor rows, and a model with new ones not due yet is looked at
again when its refresh interval will have passed; so idle models cost it nothing.  A
published estimate is written with its time, count and history, and the
trainer uses it from its next batch on.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np
import orjson

from app.features import span_rows
from app.learners.config import ModelConfig
from app.learners.noise import NoiseEstimate
from app.learners.noise_anchor import AnchorEstimate
from app.learners.noise_publish import (
    ESTIMATING,
    anchor_due,
    anchor_estimate,
    nrest_estimate,
    outcome,
    replaces_slots,
    slot_estimate,
    withdraws,
)
from app.learners.noise_slots import SlotEstimate
from app.learners.registry import algorithms, learner_class
from app.store.jobs import QueuedJob
from app.store.keys import ModelKeys
from app.store.noise import NoiseRecord
from app.store.nrest import EstimatorSettings
from app.store.util import utc_now
from workers import anchors
from workers.context import ModelRef, WorkerContext

logger = logging.getLogger(__name__)

#: Seconds between two passes that put every model on the noise due set (a trainer may have
#: died between adding samples and making the model due).
SEED_SECONDS = 300.0
#: Models one pass takes from the noise due set.
DUE_PER_PASS = 1000


class EstimateFailed(Exception):
    """NREst could not produce an estimate (the reason is the message)."""


def keeps_samples(config: ModelConfig) -> bool:
    """Whether the trainer buffers NREst samples for this model."""
    return config.learner_class.keeps_noise_samples


def estimates_periodically(config: ModelConfig, source: str) -> bool:
    """Models that keep samples, while their rates are not configured by hand (always
    when the estimate is the algorithm's own)."""
    cls = config.learner_class
    return cls.keeps_noise_samples and config.estimates_over(source)


def buffer_size(ctx: WorkerContext, config: ModelConfig) -> int:
    """Samples kept per model: its class's ``noise_samples``, else the worker's
    ``nrest_buffer``; at most as many as take the worker's ``max_dense_cells`` dense (a fit
    reads the whole buffer dense: a wide model keeps fewer, 40 at 100,000 features)."""
    cls = config.learner_class
    wanted = cls.noise_samples(config.params) or ctx.config.nrest_buffer
    return min(wanted, span_rows(config.n_features, ctx.config.max_dense_cells))


async def run_periodic(ctx: WorkerContext) -> int:
    """The periodic estimates that are due, looking only at the models on the noise due set;
    returns runs done."""
    runs = 0
    now = time.monotonic()
    if not ctx.paced or now - ctx.noise_seeded_at >= SEED_SECONDS:
        ctx.noise_seeded_at = now
        await ctx.store.noise_due.seed(await ctx.store.models.all_models())
    models = await ctx.store.noise_due.due(time.time(), DUE_PER_PASS)
    mks = [ModelKeys(*ref) for ref in models]
    new_counts = await ctx.samples.new_counts(mks)
    new_plays = await ctx.anchors.new_counts(mks)
    for ref, new, plays in zip(models, new_counts, new_plays, strict=True):
        if ctx.stopping.is_set():
            break
        runs += await _periodic(ctx, ref, new, plays, now)
        await ctx.store.noise_due.reschedule(ModelKeys(*ref),
                                             functools.partial(_next_look, ctx, ref, now))
    return runs


async def _next_look(ctx: WorkerContext, ref: ModelRef, pass_started: float) -> float | None:
    """When the jobs role next looks at ``ref`` (Unix time): none while it has nothing new
    (the trainer makes it due when it adds some); now when enough arrived since the pass
    that began at ``pass_started`` (``time.monotonic()``) looked and did not run it (the
    trainer's own lowering may have come before this pass's rescheduling); else when its
    refresh interval will have passed since its last estimate (or, past that, one interval
    from now: a run that failed is retried then)."""
    mk = ModelKeys(*ref)
    [new], [plays] = await ctx.samples.new_counts([mk]), await ctx.anchors.new_counts([mk])
    if new <= 0 and plays <= 0:
        return None
    now = time.time()
    last = ctx.nrest_last_run.get(ref, pass_started)
    if last <= pass_started and await _due(ctx, ref, new, plays, stale=False) is not None:
        return now
    left = last + ctx.config.nrest_interval - time.monotonic()
    return now + (left if left > 0 else ctx.config.nrest_interval)


async def _due(ctx: WorkerContext, ref: ModelRef, new: int, plays: int,
               stale: bool) -> tuple[ModelConfig, EstimatorSettings] | None:
    """The model's config and estimator settings when its periodic estimate is due with
    ``new`` samples and ``plays`` anchor rows since its last one (``stale``: its refresh
    interval has passed), else None."""
    if new <= 0 and plays <= 0:
        return None
    config = await ctx.store.models.config(*ref)
    if config is None:
        return None
    settings = await ctx.anchors.settings(ModelKeys(*ref), config.default_estimator)
    if settings.estimator == "anchor":
        due = config.estimates_anchors and anchor_due(plays, stale)
    else:
        due = (settings.estimator == "nrest" and new > 0 and keeps_samples(config)
               and (new >= buffer_size(ctx, config) or stale))
    noise = await ctx.store.noise.get(ModelKeys(*ref)) if due else None
    if noise is None or not config.estimates_over(noise.source):
        return None
    return config, settings


async def _periodic(ctx: WorkerContext, ref: ModelRef, new: int, plays: int,
                    now: float) -> int:
    """The periodic estimate of ``ref`` if it is due (``now``: ``time.monotonic()``, ``new``
    samples and ``plays`` anchor rows since its last one); returns 1 when it ran."""
    if new <= 0 and plays <= 0:
        return 0
    last = ctx.nrest_last_run.setdefault(ref, now)
    due = await _due(ctx, ref, new, plays, stale=now - last >= ctx.config.nrest_interval)
    if due is None:
        return 0
    config, settings = due
    try:
        out = await refresh(ctx, ref, config, settings)
    except EstimateFailed as exc:
        logger.info("noise estimate of %s/%s kept the previous rates: %s", *ref, exc)
    else:
        if out["status"] != "published":
            logger.info("noise estimate of %s/%s kept the previous rates: insufficient "
                        "data (%s, %d events)", *ref, out["reason"], out["n_events"])
    return 1


async def run_job(ctx: WorkerContext, job: QueuedJob) -> None:
    """Run one requested estimate (taken: marked running) through :func:`refresh`, the path
    of the periodic ones, and record its outcome in the job's status."""
    ref = (job.tenant, job.model)
    mk = job.keys
    config = await ctx.store.models.config(*ref)
    try:
        if config is None:
            raise EstimateFailed("the model no longer exists")
        settings = await ctx.anchors.settings(mk, config.default_estimator)
        out = await refresh(ctx, ref, config, settings)
    except EstimateFailed as exc:
        await ctx.store.noise.set_job(mk, job.job_id, status="failed", reason=str(exc),
                                      finished_at=utc_now())
        return
    await ctx.store.noise.set_job(mk, job.job_id, status="done",
                                  outcome=orjson.dumps(out).decode(), finished_at=utc_now())


async def refresh(ctx: WorkerContext, ref: ModelRef, config: ModelConfig,
                  settings: EstimatorSettings) -> dict[str, Any]:
    """Run the model's own estimator once and publish its rates by the one rule
    (:mod:`app.learners.noise_publish`); returns the outcome
    (:func:`~app.learners.noise_publish.outcome`).

    Raises :class:`EstimateFailed` when nothing can be estimated: the ``fixed``
    estimator, rates configured by hand (unless the estimate is the algorithm's), a
    model gone, or a fit that raised.
    """
    mk = ModelKeys(*ref)
    noise = await ctx.store.noise.get(mk)
    if noise is None:
        raise EstimateFailed("the model no longer exists")
    if settings.estimator not in ESTIMATING:
        raise EstimateFailed(f"its estimator is {settings.estimator!r}: its rates are the "
                             "ones given (PUT .../noise chooses anchor or nrest)")
    if not config.estimates_over(noise.source):
        raise EstimateFailed("its rates were configured by hand (PUT .../noise) and "
                             f"{config.algorithm!r} does not re-estimate them")
    ctx.nrest_last_run[ref] = time.monotonic()
    if settings.estimator == "anchor":
        out = await estimate_anchors(ctx, ref, config, settings)
    else:
        out = await estimate(ctx, ref, config, noise)
    published = out["status"] == "published"
    if (published or withdraws(out) or settings.last is None
            or settings.last["status"] != "published"):
        # an estimate refused for want of data after a published one leaves that one on show
        await ctx.anchors.record(mk, {**out, "t": utc_now()})
        ctx.metrics.noise_insufficient_data.labels(*ref).set(0 if published else 1)
    return out


async def estimate(ctx: WorkerContext, ref: ModelRef, config: ModelConfig,
                   noise: NoiseRecord) -> dict[str, Any]:
    """Fit NREst on the model's buffer in the pool; store the rates when the fit succeeded."""
    mk = ModelKeys(*ref)
    if not keeps_samples(config):
        task = config.task
        keepers = [a for a in algorithms(task) if learner_class(task, a).keeps_noise_samples]
        raise EstimateFailed(f"{config.algorithm!r} models keep no NREst sample buffer "
                             f"(the {task} algorithms that do: {', '.join(keepers) or 'none'})")
    new = (await ctx.samples.new_counts([mk]))[0]
    samples = await ctx.samples.load(mk)  # none yet: the fit says too few classes played
    X, played, clicks = ((samples.X, samples.played, samples.clicks) if samples is not None
                         else (np.zeros((0, config.n_features)), np.zeros(0, dtype=np.int64),
                               np.zeros(0)))
    fit = functools.partial(
        nrest_estimate, X, played, clicks, config.class_count,
        config.params, seed=int(config.seed or 0) * 1000 + len(noise.history),
        previous=(noise.rho0, noise.rho1))
    started = time.perf_counter()
    try:
        est: NoiseEstimate = await ctx.in_pool(fit)
    except Exception as exc:
        _count(ctx, "error")
        logger.exception("NREst of %s/%s failed", *ref)
        raise EstimateFailed(f"the fit failed: {exc!r}") from exc
    finally:
        ctx.metrics.nrest_duration.observe(time.perf_counter() - started)
    await ctx.samples.consume(mk, new)
    if not est.ok:
        _count(ctx, "failed")
        return outcome(est)
    await ctx.store.noise.put(mk, est.rho0, est.rho1, source="estimated",
                              n_samples=est.n_samples, interval=False)
    _count(ctx, "ok")
    for kind, value in (("rho0", est.rho0), ("rho1", est.rho1)):
        ctx.metrics.noise_rate.labels(*ref, kind).set(value)
    logger.info("NREst of %s/%s: rho0=%.3f rho1=%.3f from %d samples (%.1f s)", *ref,
                est.rho0, est.rho1, est.n_samples, time.perf_counter() - started)
    return outcome(est)


async def estimate_anchors(ctx: WorkerContext, ref: ModelRef, config: ModelConfig,
                           settings: EstimatorSettings) -> dict[str, Any]:
    """Anchor estimate on the model's newest plays (in the pool); the rates are stored
    only when published."""
    mk = ModelKeys(*ref)
    new = (await ctx.anchors.new_counts([mk]))[0]
    rows = await ctx.anchors.load(mk, anchors.buffer_of(config))
    empty = np.zeros(0)
    prob, score, click = ((rows.prob, rows.score, rows.click) if rows is not None
                          else (empty, empty, empty))
    fit = (functools.partial(slot_estimate, prob, score, click, max_width=settings.max_width)
           if config.logs_placements else
           functools.partial(anchor_estimate, prob, score, click, config.class_count,
                             config.params, max_width=settings.max_width,
                             half_life=settings.half_life,
                             one_right_label=bool(config.one_right_label(
                                 settings.one_right_label))))
    started = time.perf_counter()
    try:
        est: AnchorEstimate | SlotEstimate = await ctx.in_pool(fit)
    except Exception as exc:
        ctx.metrics.noise_estimates.labels("error").inc()
        logger.exception("anchor estimate of %s/%s failed", *ref)
        raise EstimateFailed(f"the estimate failed: {exc!r}") from exc
    finally:
        ctx.metrics.nrest_duration.observe(time.perf_counter() - started)
    await ctx.anchors.consume(mk, new)
    out = outcome(est)
    ctx.metrics.noise_estimates.labels(out["status"]).inc()
    if not est.published:
        if withdraws(out) and await ctx.store.noise.withdraw(mk, out["reason"]):
            logger.info("anchor estimate of %s/%s withdrawn: %s", *ref, out["reason"])
        await _examination_alone(ctx, mk, est, out)
        return out
    await ctx.store.noise.put(mk, out["rho0"], out["rho1"], source="estimated",
                              n_samples=est.n_events, slots=out.get("slots"))
    m = ctx.metrics
    for kind in ("rho0", "rho1"):
        low, high = out["interval"][kind]
        m.noise_rate.labels(*ref, kind).set(out[kind])
        m.noise_interval_width.labels(*ref, kind).set(high - low)
    logger.info("anchor estimate of %s/%s: rho0=%.3f rho1=%.3f from %d plays", *ref,
                out["rho0"], out["rho1"], est.n_events)
    return out


async def _examination_alone(ctx: WorkerContext, mk: ModelKeys, est: AnchorEstimate | SlotEstimate,
                             out: dict[str, Any]) -> None:
    """Store the examination of a per-slot estimate not published whole when it passes its
    own gate and nothing published whole is in force
    (:func:`~app.learners.noise_publish.replaces_slots`): the position bias shows it and
    the trainer learns examination-corrected clicks at the rates in force, which stay."""
    noise = await ctx.store.noise.get(mk)
    if (not isinstance(est, SlotEstimate) or noise is None or noise.source == "estimated"
            or not replaces_slots(est, noise.published_slots is not None)):
        return
    await ctx.store.noise.put(mk, noise.rho0, noise.rho1, source=noise.source,
                              slots=out["slots"])


def _count(ctx: WorkerContext, outcome: str) -> None:
    ctx.metrics.nrest_runs.labels(outcome).inc()
