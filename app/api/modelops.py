"""Model management: create (validated), describe, reset, snapshot export/import, sync."""

from __future__ import annotations

import asyncio
import base64
import io
import secrets
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from app.api.apprentice import check_mode, in_apprentice_mode, report
from app.api.configchange import change_config
from app.api.context import ApiContext
from app.api.drift import drift_response
from app.api.errors import ApiError, from_param_error, unknown_model
from app.api.evaluable import evaluation_policies
from app.api.presets import preset_params
from app.api.schemas.models import (
    ArrayPayload,
    FeedbackPolicy,
    LabelBudgetConfig,
    ModelCreateRequest,
    ModelListResponse,
    ModelResponse,
    ModelStats,
    NoiseResponse,
    PositionBiasResponse,
    SnapshotImportRequest,
    TrainerError,
    VersionsConfig,
)
from app.api.schemas.serving import ApprenticeReport
from app.api.tenantlimits import limit_reached
from app.api.versions import keep_explicit, publish_explicit
from app.features import feature_bound
from app.learners.base import Learner, ParamError, check_state
from app.learners.build import budget_strategy, build_learner
from app.learners.config import BudgetSettings, ModelConfig
from app.learners.noise_publish import position_bias
from app.learners.registry import (
    algorithms,
    check_param_types,
    default_params,
    learner_class,
)
from app.store.keys import ModelKeys
from app.store.models import ModelRecord
from app.store.noise import NoiseRecord
from app.store.util import parse_stream_id
from app.store.versions import VersionPolicy
from app.tasks import get_task

#: Fields of a snapshot's config that must match the model on import.
SNAPSHOT_CONFIG_FIELDS = ("task", "algorithm", "n_features", "n_classes")
SYNC_POLL_SECONDS = 0.02
#: Largest learner state a model may have (snapshots are rewritten at every batch).
MAX_STATE_BYTES = 64 * 2**20


def validated_config(body: ModelCreateRequest) -> ModelConfig:
    """The config to store: defaults filled in, learner built once to validate (422 naming
    the field otherwise)."""
    spec = get_task(body.task)
    algorithm = algorithms(body.task)[0] if body.algorithm is None else body.algorithm
    try:
        cls = learner_class(body.task, algorithm)
    except ParamError as exc:
        raise from_param_error(exc) from None
    params = {**default_params(cls), **cls.service_defaults,
              **preset_params(body.preset, cls.exploration_param), **body.params,
              **_size_params(body, cls, algorithm)}
    if body.n_classes is None and spec.needs_classes:
        raise ApiError(422, "invalid_param", f"task {body.task!r} needs n_classes", "n_classes")
    if body.n_classes is not None and not spec.needs_classes:
        raise ApiError(422, "invalid_param", f"task {body.task!r} takes no n_classes",
                       "n_classes")
    label_budget = None
    if body.label_budget is not None:
        if not (spec.open_feedback and spec.open_feedback.budgeted):
            raise ApiError(422, "invalid_param", f"task {body.task!r} has no label budget",
                           "label_budget")
        label_budget = BudgetSettings.model_validate(body.label_budget.model_dump())
        least = cls.labels_per_event(params)
        if least > 1:
            raise ApiError(422, "invalid_param", f"{algorithm!r} with these params needs "
                           f"{least} labels in every round; a label budget chooses between 1 "
                           "and ceil(budget)", "label_budget")
        try:
            budget_strategy(label_budget, None)
        except ParamError as exc:
            raise ApiError(422, "invalid_param", exc.message,
                           f"label_budget.{exc.field}") from None
    if body.feedback.on_timeout == "no_click" and not (
            spec.has_clicks and cls.no_click_feedback(params) is not None):
        raise ApiError(422, "invalid_param", f"{algorithm!r} learns from labels, not clicks: "
                       "an unanswered decision can only be dropped", "feedback.on_timeout")
    if body.feedback.aggregation == "sum" and spec.add_feedback is None:
        raise ApiError(422, "invalid_param", f"task {body.task!r} does not add up its "
                       "feedback: aggregation can only be \"earliest\"", "feedback.aggregation")
    try:
        check_param_types(cls, body.params)
    except ParamError as exc:
        raise from_param_error(exc) from None
    document: dict[str, Any] = {
        "model_id": body.model_id, "task": body.task, "algorithm": algorithm,
        "n_features": body.n_features, "n_classes": body.n_classes, "params": params,
        "feedback": body.feedback.model_dump(), "seed": body.seed,
        "uid": secrets.token_hex(8)}
    if body.preset is not None:
        document.update(preset=body.preset)
    if label_budget is not None:
        document.update(label_budget=label_budget)
    check_mode(body.mode, spec, cls)
    document.update(max_feature_norm=body.max_feature_norm, mode=body.mode,
                    versions=body.versions.model_dump(), drift=body.drift.model_dump())
    config = ModelConfig.of(document)
    try:
        # from the shapes, before anything is allocated; then build once to validate
        state_bytes = (cls.state_bytes(body.n_features, body.n_classes, params)
                       + cls.buffer_bytes(body.n_features, body.n_classes, params))
        if state_bytes <= MAX_STATE_BYTES:
            learner = build_learner(config)
            # a size left to its default is stored as the value in use (the learner keeps
            # its hyperparameters under their names)
            config = config.updated(params={
                **params, **{name: int(getattr(learner, name)) for name in SIZE_PARAMS
                             if name in params and params[name] is None}})
    except ParamError as exc:
        field = exc.field if exc.field.startswith("params.") or exc.field in (
            "n_features", "n_classes", "task", "algorithm") else f"params.{exc.field}"
        raise ApiError(422, "invalid_param", exc.message, field) from None
    except (TypeError, ValueError, KeyError) as exc:
        raise ApiError(422, "invalid_param", str(exc), "params") from None
    if state_bytes > MAX_STATE_BYTES:
        raise ApiError(422, "invalid_param", f"the model's state would take "
                       f"{state_bytes / 2**20:.0f} MiB (at most {MAX_STATE_BYTES // 2**20} MiB: "
                       "it is written at every trainer batch); use fewer features or smaller "
                       "buffers/budgets in params", "params")
    return config


#: Sizes a request may give beside ``n_features`` for learners that take them as params.
SIZE_PARAMS = ("n_action_features", "slots")


def _size_params(body: ModelCreateRequest, cls: type[Learner], algorithm: str,
                 ) -> dict[str, int]:
    """The request's :data:`SIZE_PARAMS` as params (422 naming the field if the learner has
    no such param or ``params`` gives it too)."""
    out = {}
    for name in SIZE_PARAMS:
        value = getattr(body, name)
        if value is None:
            continue
        if name not in default_params(cls):
            raise ApiError(422, "invalid_param", f"{algorithm!r} of task {body.task!r} takes "
                           f"no {name}", name)
        if name in body.params:
            raise ApiError(422, "invalid_param", f"give {name} once, not also in params",
                           f"params.{name}")
        out[name] = value
    return out


def position_bias_response(config: ModelConfig,
                           noise: NoiseRecord | None) -> PositionBiasResponse:
    """The position bias per slot relative to slot 0 and its source, by the one rule
    (:func:`~app.learners.noise_publish.position_bias`): the per-slot estimate in force,
    else the configured values, else 1 per slot flagged ``calibration_unreliable``."""
    values, source = position_bias(config.learner_class,
                                   config.params, None if noise is None else noise.slots)
    return PositionBiasResponse(values=values, source=source,  # type: ignore[arg-type]
                                calibration_unreliable=source == "insufficient_data")


def has_noise_rates(config: ModelConfig) -> bool:
    """Whether the model has click-noise rates (``GET .../noise``): its feedback is a click,
    or its learner corrects clicks it learns as rewards by them (``continuous``)."""
    return get_task(config.task).has_clicks or config.learner_class.takes_noise_rates(
        config.params)


def noise_response(noise: NoiseRecord | None) -> NoiseResponse | None:
    if noise is None:
        return None
    return NoiseResponse(rho0=noise.rho0, rho1=noise.rho1, source=noise.source,  # type: ignore[arg-type]
                         estimated_at=noise.estimated_at, n_samples=noise.n_samples,
                         history=noise.history)


def calibrated_reward(record: ModelRecord) -> tuple[float | None, bool]:
    """``debiased_reward`` at the model's current rates (None before any click) and whether
    it is, or would be, unreliable (:attr:`~app.store.noise.NoiseRecord.calibration_unreliable`:
    also before the first click, the rates are all there is to go by)."""
    noise = record.noise or NoiseRecord(0.0, 0.0, "configured")
    return record.snapshot.debiased_reward(noise.rho0, noise.rho1), noise.calibration_unreliable


def model_response(record: ModelRecord) -> ModelResponse:
    """The API view of a stored model, the same on every route that shows one."""
    c, s = record.config, record.snapshot
    reward, unreliable = calibrated_reward(record)
    position_bias = (position_bias_response(c, record.noise)
                     if c.learner_class.estimates_position_bias
                     else None)
    return ModelResponse(
        model_id=c.model_id, task=c.task, algorithm=c.algorithm,
        preset=c.preset, n_features=c.n_features, n_classes=c.n_classes,
        params=c.params,
        feedback=FeedbackPolicy.model_validate(c.feedback.model_dump()), seed=c.seed,
        created_at=c.created_at or "",
        version=s.version, updated_at=s.updated_at,
        stats=ModelStats(predictions=record.predictions,
                         feedback_accepted=record.feedback_accepted,
                         events_applied=s.events_applied, events_expired=s.events_expired,
                         events_dead_lettered=record.dead_lettered,
                         dead_letters_dropped=record.dead_letters_dropped,
                         awaiting_feedback=record.awaiting_feedback, backlog=record.backlog,
                         debiased_reward=reward, calibration_unreliable=unreliable,
                         trainer_error=(None if record.trainer_failure is None
                                        else TrainerError(**asdict(record.trainer_failure)))),
        noise=noise_response(record.noise) if has_noise_rates(c) else None,
        label_budget=(None if c.label_budget is None
                      else LabelBudgetConfig.model_validate(c.label_budget.model_dump())),
        max_feature_norm=feature_bound(c), position_bias=position_bias,
        mode=c.mode,  # type: ignore[arg-type]
        apprentice=(ApprenticeReport(**report(record.apprentice))
                    if in_apprentice_mode(c) or record.apprentice else None),
        versions=VersionsConfig(**asdict(VersionPolicy.of(c))),
        evaluation_policies=list(evaluation_policies(c)),
        drift=drift_response(c, record.drift))


async def create_model(ctx: ApiContext, tenant: str, body: ModelCreateRequest) -> ModelResponse:
    config = validated_config(body)
    most = ctx.settings.max_models_per_tenant
    if await ctx.store.models.count(tenant) >= most:
        raise limit_reached(ctx, tenant, "max_models_per_tenant",
                            f"a tenant holds at most {most} models; delete one first",
                            "model_id")
    learner = build_learner(config)
    rho0, rho1 = config.initial_noise_rates
    given = any(name in body.params for name in ("rho0", "rho1"))
    stored = await ctx.store.models.create(tenant, config, learner.get_state(), rho0, rho1,
                                           rates_given=given)
    if stored is None:
        raise ApiError(409, "model_exists", f"model {body.model_id!r} exists", "model_id")
    await keep_explicit(ctx, ModelKeys(tenant, body.model_id), stored, 1, "create")
    return await describe_model(ctx, tenant, body.model_id)


async def list_models(ctx: ApiContext, tenant: str) -> ModelListResponse:
    """Every model of ``tenant``."""
    records = await ctx.store.models.records(tenant, await ctx.store.models.list_ids(tenant))
    return ModelListResponse(models=[model_response(r) for r in records])


async def describe_model(ctx: ApiContext, tenant: str, model_id: str) -> ModelResponse:
    record = await ctx.store.models.record(tenant, model_id)
    if record is None:
        raise unknown_model(model_id)
    reward, _ = calibrated_reward(record)
    if reward is not None:
        ctx.metrics.debiased_reward.labels(tenant, model_id).set(reward)
    return model_response(record)


async def set_mode(ctx: ApiContext, tenant: str, config: ModelConfig,
                   mode: str) -> ModelResponse:
    """Serve in ``mode`` from now on (422 naming ``mode`` when the model cannot).  Decisions
    made before keep the mode they were made in: an apprentice decision's feedback still
    teaches about the baseline it served.  The mode is set on the config stored at the
    moment of writing (a promotion or rollback meanwhile keeps its algorithm and params)."""

    def with_mode(current: ModelConfig) -> ModelConfig | None:
        check_mode(mode, get_task(current.task), current.learner_class)
        return None if current.mode == mode else current.updated(mode=mode)

    await change_config(ctx, tenant, config.model_id, with_mode)
    return await describe_model(ctx, tenant, config.model_id)


async def reset_model(ctx: ApiContext, tenant: str, config: ModelConfig) -> ModelResponse:
    """Initial weights under a new version (queued events still apply afterwards); the
    decision log is kept, with a ``reset`` marker."""
    learner = build_learner(config)
    await publish_explicit(ctx, tenant, config, learner.get_state(), "reset", marker="reset")
    return await describe_model(ctx, tenant, config.model_id)


def encode_array(arr: np.ndarray) -> ArrayPayload:
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr), allow_pickle=False)
    return ArrayPayload(dtype=arr.dtype.str, shape=list(arr.shape),
                        data_b64=base64.b64encode(buf.getvalue()).decode("ascii"))


def decode_array(name: str, payload: ArrayPayload) -> np.ndarray:
    field = f"state.{name}"
    try:
        arr: np.ndarray = np.load(io.BytesIO(base64.b64decode(payload.data_b64, validate=True)),
                      allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ApiError(422, "invalid_snapshot", f"not base64 of .npy bytes: {exc}", field) from None
    if list(arr.shape) != payload.shape:
        raise ApiError(422, "invalid_snapshot", f"shape {list(arr.shape)} != declared "
                       f"{payload.shape}", field)
    return arr


async def export_snapshot(ctx: ApiContext, tenant: str, config: ModelConfig) -> dict[str, Any]:
    snap = await ctx.store.snapshots.load(ModelKeys(tenant, config.model_id))
    if snap is None:
        raise unknown_model(config.model_id)
    return {"model": {k: getattr(config, k)
                      for k in ("model_id", *SNAPSHOT_CONFIG_FIELDS, "params")},
            "version": snap.version,
            "state": {name: encode_array(arr) for name, arr in snap.state.items()}}


async def import_snapshot(ctx: ApiContext, tenant: str, config: ModelConfig,
                          body: SnapshotImportRequest) -> ModelResponse:
    if body.model is not None:
        for name in SNAPSHOT_CONFIG_FIELDS:
            if getattr(body.model, name) != getattr(config, name):
                raise ApiError(422, "snapshot_mismatch", f"snapshot {name} "
                               f"{getattr(body.model, name)!r} != model's "
                               f"{getattr(config, name)!r}",
                               f"model.{name}")
    learner = build_learner(config)
    given = {name: decode_array(name, payload) for name, payload in body.state.items()}
    try:
        state = check_state(learner.get_state(), given)
        learner.set_state(state)
    except ParamError as exc:
        raise ApiError(422, "snapshot_mismatch", exc.message, exc.field) from None
    await publish_explicit(ctx, tenant, config, learner.get_state(), "import")
    return await describe_model(ctx, tenant, config.model_id)


async def sync_model(ctx: ApiContext, tenant: str, model_id: str,
                     timeout: float) -> dict[str, int]:
    """Wait until the trainer has handled every event accepted before the call (504 after
    ``timeout``); ``pending`` counts the accepted events it could not apply (dead letters)."""
    mk = ModelKeys(tenant, model_id)
    target = parse_stream_id(await ctx.store.events.last_stream_id(mk))
    deadline = time.monotonic() + timeout
    while True:
        info = await ctx.store.snapshots.info(mk)
        if info is None:
            raise unknown_model(model_id)
        # handled, not only published: the after-publish steps (drift, series...) ran too
        done = parse_stream_id(await ctx.store.events.handled_id(mk)) >= target
        if not done:
            delivered, unacked = await ctx.store.events.group_progress(mk)
            # the rest was skipped or dead-lettered by the trainer, nothing left to apply
            done = unacked == 0 and parse_stream_id(delivered) >= target
        if done:
            dead = await ctx.store.dead_letters.held(mk)
            return {"version": info.version, "pending": dead, "dead_lettered": dead}
        if time.monotonic() >= deadline:
            failure = await ctx.store.failures.read(mk)
            raise ApiError(504, "sync_timeout", f"events not applied within {timeout} s " + (
                "(is a trainer running?)" if failure is None else
                f"(the trainer fails on this model since {failure.since}: {failure.error})"))
        await asyncio.sleep(SYNC_POLL_SECONDS)
