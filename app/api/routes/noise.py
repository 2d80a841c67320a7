"""Noise-rate routes: read, configure, estimate (the model's own estimator)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query

from app.api.deps import Context, ModelDep
from app.api.errors import ApiError, from_param_error, unknown_model
from app.api.modelops import has_noise_rates, noise_response
from app.api.responses import OrjsonResponse
from app.api.schemas.common import ErrorResponse
from app.api.schemas.noise import (
    NoiseEstimateResponse,
    NoiseInterval,
    NoiseJobResponse,
    NoiseOutcome,
    NoisePutRequest,
    NoiseStatusResponse,
)
from app.learners.base import ParamError
from app.learners.config import ModelConfig
from app.learners.noise_anchor import ONE_RIGHT_UNSTATED, TOO_FEW_EVENTS
from app.learners.noise_publish import ESTIMATING
from app.learners.proxy import check_noise_rates
from app.learners.registry import algorithms, learner_class
from app.store.models import ModelView
from app.store.noise import NoiseRecord, estimable

router = APIRouter(prefix="/v1/models", tags=["noise"],
                   responses={401: {"model": ErrorResponse}, 404: {"model": ErrorResponse}})
JOB_POLL_SECONDS = 0.05
#: Bounds of ``?timeout=`` (shorter than one poll of the job cannot see it finish).
MIN_TIMEOUT_SECONDS = JOB_POLL_SECONDS
MAX_TIMEOUT_SECONDS = 300.0


def _clicks_only(view: ModelView) -> None:
    """404 unless the model has noise rates (:func:`~app.api.modelops.has_noise_rates`)."""
    if not has_noise_rates(view.config):
        raise ApiError(404, "no_noise_rates",
                       "noise rates exist for the models that learn from clicks")


def _uses_noise_rates(view: ModelView) -> None:
    """422 unless the model's learner uses noise rates (as its class declares)."""
    config = view.config
    task, algorithm = config.task, config.algorithm
    if config.learner_class.takes_noise_rates(config.params):
        return
    users = [a for a in algorithms(task) if learner_class(task, a).uses_noise_rates]
    which = (f"the {task} algorithms that use them: {', '.join(users)}" if users
             else f"no {task} algorithm uses them")
    raise ApiError(422, "noise_rates_unused", f"{algorithm!r} (with these params) ignores "
                   f"click-noise rates, so setting them would change nothing; {which}")


@router.get("/{model_id}/noise", response_model=NoiseStatusResponse)
async def get_noise(view: ModelDep, ctx: Context) -> NoiseStatusResponse:
    """Current rates, their source, the estimator's status and interval, and the history."""
    _clicks_only(view)
    return await _status(ctx, view, view.noise)


@router.put("/{model_id}/noise", response_model=NoiseStatusResponse,
            responses={422: {"model": ErrorResponse}})
async def put_noise(body: NoisePutRequest, view: ModelDep, ctx: Context) -> NoiseStatusResponse:
    """Configure rates (each in [0, 1), sum < 1; the trainer uses them from its next batch),
    the estimator (``anchor``, ``nrest``, ``fixed``), the anchor estimate's ``max_width``,
    ``half_life`` and whether every input has exactly one right label (``one_right_label``;
    422 ``one_right_label_unused`` for a model whose estimate does not rest on it).  A body
    giving any of the last four queues a run of the model's estimator (as ``POST
    .../noise/estimate``, unless its rates are not re-estimated), so that the rule now in
    force publishes or withdraws at the jobs role's next poll, not at the next refresh.

    A model whose algorithm ignores noise rates answers 422 ``noise_rates_unused``;
    an estimator that cannot serve the model (``nrest`` without NREst samples, ``anchor``
    without scored plays or logged placements) 422 ``estimator_unavailable``.  Rates given
    for a rank model replace its per-slot estimate: the same ``rho0`` in every slot.
    """
    _clicks_only(view)
    _uses_noise_rates(view)
    config = view.config
    if body.estimator is not None:
        _check_estimator(config, body.estimator)
    stating = "one_right_label" in body.model_fields_set  # null states "the algorithm's"
    if stating:
        _rests_on_one_right_label(config)
    await ctx.store.anchors.configure(view.keys, estimator=body.estimator,
                                      max_width=body.max_width,
                                      half_life=body.half_life_setting())
    if stating:
        await ctx.store.anchors.state_one_right_label(view.keys, body.one_right_label)
    record = view.noise
    if body.rho0 is not None and body.rho1 is not None:
        try:
            rho0, rho1 = check_noise_rates(body.rho0, body.rho1)
        except ParamError as exc:
            raise from_param_error(exc) from None
        record = await ctx.store.noise.put(view.keys, rho0, rho1, source="configured")
        for kind, value in (("rho0", rho0), ("rho1", rho1)):
            ctx.metrics.noise_rate.labels(view.tenant, config.model_id, kind).set(value)
    # what the estimate rests on changed: run it now rather than at the next refresh, so
    # that a published estimate is withdrawn (or one published) by the rule now in force
    if ({"estimator", "max_width", "half_life", "one_right_label"} & body.model_fields_set
            and await _estimate_unavailable(ctx, view, record) is None):
        await ctx.store.noise.queue_estimate(view.keys)
    return await _status(ctx, view, record)


def _rests_on_one_right_label(config: ModelConfig) -> None:
    """422 naming ``one_right_label`` unless the model's anchor estimate rests on it (the
    label estimate; a rank model's per-slot estimate and a model without scored plays do
    not)."""
    if config.one_right_label(None) is None:
        raise ApiError(422, "one_right_label_unused",
                       f"the noise estimate of {config.algorithm!r} models does not rest on "
                       "one right label per input, so stating it would change nothing",
                       "one_right_label")


def _check_estimator(config: ModelConfig, estimator: str) -> None:
    """422 ``estimator_unavailable`` naming ``estimator`` unless it can serve the model:
    ``anchor`` needs the plays the trainer scores for it, ``nrest`` an NREst sample buffer."""
    usable = config.usable_estimators
    if estimator in usable:
        return
    why = ("keep no NREst sample buffer" if estimator == "nrest" else
           "are not scored for it (it needs one click per played label)")
    raise ApiError(422, "estimator_unavailable", f"{config.algorithm!r} models {why}; use "
                   f"{' or '.join(usable)} (fixed: the rates you give)", "estimator")


def published_interval(raw: dict[str, Any] | None) -> NoiseInterval | None:
    """An estimate's interval when it was published (both bounds), else None: the interval
    shown is the published estimate's, and one that was not published has none."""
    if not raw or raw.get("rho0") is None or raw.get("rho1") is None:
        return None
    return NoiseInterval(**raw)


async def _status(ctx: Context, view: ModelView, record: NoiseRecord | None
                  ) -> NoiseStatusResponse:
    """The noise record with the estimator's settings and the last anchor outcome; a rank
    model's ``slots`` are the per-slot estimate in force (published whole or its
    examination alone), else, while the rates await an estimate, the last estimate's
    values, flagged unpublished (none once the rates are configured)."""
    out = noise_response(record)
    if record is None or out is None:
        raise unknown_model(view.config.model_id)
    settings = await ctx.store.anchors.settings(view.keys, view.config.default_estimator)
    last = settings.last or {}
    current = replace(record, estimator=settings.estimator, estimable=estimable(view.config))
    status = current.status
    n_events = last.get("n_events") or await ctx.store.anchors.count(view.keys)
    interval = published_interval(last.get("interval"))
    one_right = view.config.one_right_label(settings.one_right_label)
    awaiting = ONE_RIGHT_UNSTATED if one_right is False else TOO_FEW_EVENTS
    return NoiseStatusResponse.model_validate({
        **out.model_dump(), "estimator": settings.estimator, "max_width": settings.max_width,
        "half_life": settings.half_life, "one_right_label": one_right,
        "status": status,
        "reason": (current.fixed_reason if status == "fixed" else str(last.get(
            "reason", awaiting if status == "insufficient_data" else ""))),
        "interval": interval, "n_events": int(n_events),
        "withdrawn": current.withdrawn or None,
        "calibration_unreliable": current.calibration_unreliable,
        "slots": _withdrawn_rows(current) or (
            last.get("slots") if status == "insufficient_data"
            and last.get("status") != "published" else None)})


def _withdrawn_rows(record: NoiseRecord) -> list[dict[str, Any]] | None:
    """The per-slot rows in force, their ``rho0`` and ``rho1`` shown unpublished once the
    estimate is withdrawn (still in use, flagged; ``theta``'s gate does not rest on the
    anchors, so it stays as published)."""
    if not record.slots or not record.withdrawn:
        return record.slots
    return [{**row, "published": {**row.get("published", {}), "rho0": False, "rho1": False}}
            for row in record.slots]


@router.post("/{model_id}/noise/estimate", status_code=202, response_model=NoiseJobResponse,
             responses={200: {"model": NoiseEstimateResponse,
                              "description": "with wait=true: the noise status and the "
                                             "estimate's outcome"},
                        504: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
async def create_noise_estimate(
        view: ModelDep, ctx: Context,
        wait: Annotated[bool, Query(description="wait for the estimate (200)")] = False,
        timeout: Annotated[float, Query(
            ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS,
            description="with wait=true: seconds to wait for the estimate (504 after)")] = 60.0
        ) -> OrjsonResponse:
    """Queue a run of the model's own estimator (202 with its job id); ``?wait=true``: 200
    with the noise status (as ``GET .../noise``) and the run's outcome under ``estimate``.

    The run is the periodic refresh's: its rates replace the model's only when published
    by the same rule (anchor: both intervals at most ``max_width`` wide), otherwise the
    outcome says ``insufficient_data`` with the reason and the counts.  A model whose
    estimator is ``fixed``, or whose rates were configured by hand (unless the estimate is
    the algorithm's), answers 422 ``estimate_unavailable``.  A model has at most one
    queued or running job: a request made meanwhile gets (and waits for) that job.
    """
    _clicks_only(view)
    unavailable = await _estimate_unavailable(ctx, view, view.noise)
    if unavailable is not None:
        raise unavailable
    job_id = await ctx.store.noise.queue_estimate(view.keys)
    if not wait:
        return OrjsonResponse({"job_id": job_id}, status_code=202)
    deadline = time.monotonic() + timeout
    job: dict[str, str] | None = None
    while time.monotonic() < deadline:
        job = await ctx.store.noise.job(view.keys, job_id)
        if job and job.get("status") == "failed":
            raise ApiError(422, "estimate_failed", job.get("reason") or "the estimate failed")
        if job and job.get("status") == "done":
            record = await ctx.store.noise.get(view.keys)
            status = await _status(ctx, view, record)
            found = orjson.loads(job["outcome"])
            found["interval"] = published_interval(found.get("interval"))
            out = NoiseEstimateResponse(**status.model_dump(), estimate=NoiseOutcome(**found))
            return OrjsonResponse(out.model_dump(), status_code=200)
        await asyncio.sleep(JOB_POLL_SECONDS)
    raise ApiError(504, "estimate_timeout", _timeout_message(job_id, job, timeout))


async def _estimate_unavailable(ctx: Context, view: ModelView,
                                record: NoiseRecord | None) -> ApiError | None:
    """The 422 ``estimate_unavailable`` a run of the model's estimator gets (None: it
    re-estimates the rates ``record``)."""
    settings = await ctx.store.anchors.settings(view.keys, view.config.default_estimator)
    if settings.estimator not in ESTIMATING:
        return ApiError(422, "estimate_unavailable", f"the model's estimator is "
                        f"{settings.estimator!r}: its rates are the ones given; choose "
                        "anchor or nrest with PUT .../noise", "estimator")
    if record is not None and not view.config.estimates_over(record.source):
        return ApiError(422, "estimate_unavailable", "the model's rates were configured by "
                        f"hand (PUT .../noise) and {view.config.algorithm!r} does not "
                        "re-estimate configured rates", "estimator")
    return None


def _timeout_message(job_id: str, job: dict[str, str] | None, timeout: float) -> str:
    """What a 504 can truly say of a job that did not finish within ``timeout``."""
    if job is not None and job.get("status") == "running":
        return (f"no estimate within {timeout:g} s: job {job_id} is running; wait longer "
                "or poll GET .../noise for the estimate")
    return (f"no estimate within {timeout:g} s: job {job_id} is still queued (no worker's "
            "jobs role has taken it yet: workers take queued jobs at their next poll); wait "
            "longer, or poll GET .../noise for the estimate")
