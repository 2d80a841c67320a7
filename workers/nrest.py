"""NREst role: re-estimates the click-noise rates rho0, rho1 of the models that learn them.

Each model names its ``estimator`` (:class:`app.store.nrest.EstimatorSettings`):
``anchor`` (the default), ``nrest`` or ``fixed`` (never re-estimated).

**anchor** (:func:`estimate_anchors`): every model whose learner uses noise
rates, unless its rates were configured by hand and the estimate is not part
of the algorithm.  The trainer keeps ``(propensity, out-of-sample score,
click)`` of every observed play (:mod:`workers.anchors`); every
:data:`ANCHOR_EVERY` new plays, or ``nrest_interval`` seconds with some new
plays, :func:`app.learners.noise_anchor.estimate_from_anchors` runs on the
newest :data:`workers.anchors.ANCHOR_BUFFER` plays in the process pool.  Its
rates replace the model's only when published (both intervals at most the
model's ``max_width`` wide); until then the model keeps its configured or
initial rates and the outcome (``insufficient_data``, the reason and the
counts) is recorded for ``GET .../noise``.

**nrest** (the paper's estimator, below):

Which models: those whose learner class declares ``keeps_noise_samples``
(:mod:`app.learners.base`), unless their rates were configured with
``PUT .../noise`` and NREst is not part of the algorithm
(``owns_noise_estimate``).  For these the trainer
appends the logged ``(x, played label, noisy click)`` of every applied
feedback event (not the sweeper's default no-click events, which were never
observed) to a capped sample buffer (the class's ``noise_samples`` of the
model's params, else the worker's ``nrest_buffer``).

One pass (:func:`run_pass`) first runs the queued jobs of
``POST .../noise/estimate`` (any label model with samples) and of
``POST .../evaluations`` (:mod:`workers.evaluations`), then every
model due for a periodic run: ``n_s`` new samples since its last estimate,
or ``nrest_interval`` seconds with some new samples.  The fit
(:func:`app.learners.noise.estimate_noise_rates`, with the model's
``percentile`` and ``beta_min``) runs in the worker's process pool, never
on the event loop; the estimate is written with its time, sample count and
history, and the trainer uses it from its next batch on.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np

from app.learners.base import Batch
from app.learners.build import default_estimator, keeps_anchors
from app.learners.noise import NoiseEstimate, estimate_noise_rates
from app.learners.noise_anchor import AnchorEstimate, estimate_from_anchors
from app.learners.registry import algorithms, learner_class
from app.store.jobs import QueuedJob
from app.store.keys import ModelKeys
from app.store.nrest import EstimatorSettings
from app.store.util import utc_now
from workers import evaluations, jobs
from workers.anchors import ANCHOR_BUFFER
from workers.context import ModelRef, WorkerContext

logger = logging.getLogger(__name__)

#: beta_min of the learners that take no such parameter (the ridge bandits).
DEFAULT_BETA_MIN = 0.1
#: New observed plays that make an anchor estimate due.
ANCHOR_EVERY = 2_500


class EstimateFailed(Exception):
    """NREst could not produce an estimate (the reason is the message)."""


def keeps_samples(config: dict[str, Any]) -> bool:
    """Whether the trainer buffers NREst samples for this model."""
    return learner_class(config["task"], config["algorithm"]).keeps_noise_samples


def estimates_periodically(config: dict[str, Any], source: str) -> bool:
    """Models that keep samples, while their rates are not configured by hand (always
    when the estimate is the algorithm's own)."""
    cls = learner_class(config["task"], config["algorithm"])
    return cls.keeps_noise_samples and estimates_over(config, source)


def estimates_over(config: dict[str, Any], source: str) -> bool:
    """Whether an estimate may replace rates from ``source``: not rates configured by hand,
    unless the estimate is part of the algorithm."""
    cls = learner_class(config["task"], config["algorithm"])
    return cls.owns_noise_estimate or source != "configured"


def buffer_size(ctx: WorkerContext, config: dict[str, Any]) -> int:
    """Samples kept per model: its class's ``noise_samples``, else the worker's
    ``nrest_buffer``."""
    cls = learner_class(config["task"], config["algorithm"])
    return cls.noise_samples(config.get("params") or {}) or ctx.config.nrest_buffer


def samples_of(config: dict[str, Any], applied: Batch, observed: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(X, played, clicks)`` of the rows of ``applied`` that are ``observed`` feedback
    with a click (None: none, or the model keeps no samples)."""
    if not keeps_samples(config) or "click" not in applied or not observed.any():
        return None
    return (applied["x"][observed],
            np.asarray(applied["played"][observed], dtype=np.int64).reshape(-1),
            np.asarray(applied["click"][observed], dtype=float).reshape(-1))


async def run_pass(ctx: WorkerContext) -> int:
    """Queued jobs first (NREst runs, then policy evaluations), then the periodic runs that
    are due; returns runs done."""
    runs = await jobs.run_queued(ctx, ctx.store.noise.jobs, run_job)
    runs += await evaluations.run_queued(ctx)
    models = await ctx.store.models.all_models()
    mks = [ModelKeys(*ref) for ref in models]
    new_counts = await ctx.samples.new_counts(mks)
    new_plays = await ctx.anchors.new_counts(mks)
    now = time.monotonic()
    for ref, new, plays in zip(models, new_counts, new_plays, strict=True):
        if ctx.stopping.is_set():
            break
        if new <= 0 and plays <= 0:
            continue
        config = await ctx.store.models.config(*ref)
        if config is None:
            continue
        settings = await ctx.anchors.settings(ModelKeys(*ref), default_estimator(config))
        last = ctx.nrest_last_run.setdefault(ref, now)
        stale = now - last >= ctx.config.nrest_interval
        if settings.estimator == "anchor":
            due = plays > 0 and keeps_anchors(config) and (plays >= ANCHOR_EVERY or stale)
        else:
            due = (settings.estimator == "nrest" and new > 0 and keeps_samples(config)
                   and (new >= buffer_size(ctx, config) or stale))
        noise = await ctx.store.noise.get(ModelKeys(*ref)) if due else None
        if noise is None or not estimates_over(config, noise.source):
            continue
        try:
            if settings.estimator == "anchor":
                await estimate_anchors(ctx, ref, config, settings, plays)
            else:
                await estimate(ctx, ref, config, new)
        except EstimateFailed as exc:
            logger.info("noise estimate of %s/%s kept the previous rates: %s", *ref, exc)
        runs += 1
    return runs


async def run_job(ctx: WorkerContext, job: QueuedJob) -> None:
    """Run one estimate (taken: marked running) and record its outcome in the job's status."""
    ref = (job.tenant, job.model)
    mk = job.keys
    config = await ctx.store.models.config(*ref)
    try:
        if config is None:
            raise EstimateFailed("the model no longer exists")
        if not keeps_samples(config):
            task = config["task"]
            keepers = [a for a in algorithms(task) if learner_class(task, a).keeps_noise_samples]
            raise EstimateFailed(f"{config['algorithm']!r} models keep no NREst sample buffer "
                                 f"(the {task} algorithms that do: {', '.join(keepers) or 'none'})")
        new = (await ctx.samples.new_counts([mk]))[0]
        est = await estimate(ctx, ref, config, new)
    except EstimateFailed as exc:
        await ctx.store.noise.set_job(mk, job.job_id, status="failed", reason=str(exc),
                                      finished_at=utc_now())
        return
    await ctx.store.noise.set_job(mk, job.job_id, status="done", rho0=est.rho0, rho1=est.rho1,
                                  n_samples=est.n_samples, finished_at=utc_now())


async def estimate(ctx: WorkerContext, ref: ModelRef, config: dict[str, Any],
                   new: int) -> NoiseEstimate:
    """Fit NREst on the model's buffer in the pool and store the estimate."""
    mk = ModelKeys(*ref)
    ctx.nrest_last_run[ref] = time.monotonic()
    samples = await ctx.samples.load(mk)
    noise = await ctx.store.noise.get(mk)
    if samples is None or noise is None:
        _count(ctx, "failed")
        raise EstimateFailed("no samples buffered yet")
    params = config.get("params") or {}
    fit = functools.partial(
        estimate_noise_rates, samples.X, samples.played, samples.clicks, config["n_classes"],
        percentile=params.get("percentile"),
        beta_min=float(params.get("beta_min", DEFAULT_BETA_MIN)),
        seed=int(config.get("seed") or 0) * 1000 + len(noise.history),
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
        raise EstimateFailed(est.reason)
    await ctx.store.noise.put(mk, est.rho0, est.rho1, source="estimated",
                              n_samples=est.n_samples)
    _count(ctx, "ok")
    for kind, value in (("rho0", est.rho0), ("rho1", est.rho1)):
        ctx.metrics.noise_rate.labels(*ref, kind).set(value)
    logger.info("NREst of %s/%s: rho0=%.3f rho1=%.3f from %d samples (%.1f s)", *ref,
                est.rho0, est.rho1, est.n_samples, time.perf_counter() - started)
    return est


async def estimate_anchors(ctx: WorkerContext, ref: ModelRef, config: dict[str, Any],
                           settings: EstimatorSettings, new: int) -> AnchorEstimate:
    """Anchor estimate on the model's newest plays (in the pool); the rates are stored
    only when published, the outcome always until a first estimate is published."""
    mk = ModelKeys(*ref)
    ctx.nrest_last_run[ref] = time.monotonic()
    rows = await ctx.anchors.load(mk, ANCHOR_BUFFER)
    if rows is None:
        raise EstimateFailed("no observed plays yet")
    params = config.get("params") or {}
    fit = functools.partial(
        estimate_from_anchors, rows.prob, rows.score, rows.click, config["n_classes"],
        max_width=settings.max_width,
        beta_min=float(params.get("beta_min", DEFAULT_BETA_MIN)))
    started = time.perf_counter()
    try:
        est: AnchorEstimate = await ctx.in_pool(fit)
    except Exception as exc:
        ctx.metrics.noise_estimates.labels("error").inc()
        logger.exception("anchor estimate of %s/%s failed", *ref)
        raise EstimateFailed(f"the estimate failed: {exc!r}") from exc
    finally:
        ctx.metrics.nrest_duration.observe(time.perf_counter() - started)
    await ctx.anchors.consume(mk, new)
    outcome = anchor_outcome(est)
    ctx.metrics.noise_estimates.labels(outcome["status"]).inc()
    if not est.published:
        if settings.last is None or settings.last["status"] != "published":
            await ctx.anchors.record(mk, outcome)
            ctx.metrics.noise_insufficient_data.labels(*ref).set(1)
        raise EstimateFailed(f"insufficient data ({est.reason}, {est.n_events} plays)")
    await ctx.store.noise.put(mk, est.rho0, est.rho1, source="estimated",
                              n_samples=est.n_events)
    await ctx.anchors.record(mk, outcome)
    m = ctx.metrics
    m.noise_insufficient_data.labels(*ref).set(0)
    for kind, value, width in zip(("rho0", "rho1"), (est.rho0, est.rho1), est.widths,
                                  strict=True):
        m.noise_rate.labels(*ref, kind).set(value)
        m.noise_interval_width.labels(*ref, kind).set(width)
    logger.info("anchor estimate of %s/%s: rho0=%.3f rho1=%.3f from %d plays", *ref,
                est.rho0, est.rho1, est.n_events)
    return est


def anchor_outcome(est: AnchorEstimate) -> dict[str, Any]:
    """What ``GET .../noise`` shows of an anchor estimate (JSON-ready)."""
    published = est.published
    return {
        "status": "published" if published else "insufficient_data",
        "reason": est.reason,
        "t": utc_now(),
        "n_events": est.n_events,
        "n_explored": est.n_explored,
        "n_top": est.n_top,
        "interval": {"level": est.level,
                     "rho0": list(est.rho0_interval) if published else None,
                     "rho1": list(est.rho1_interval) if published else None},
    }


def _count(ctx: WorkerContext, outcome: str) -> None:
    ctx.metrics.nrest_runs.labels(outcome).inc()
