"""Kept versions and rollback: explicit publishes (kept at once), the list, the rollback."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.api.configchange import change_config
from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.api.schemas.versions import KeptVersionResponse, RollbackResponse, VersionsResponse
from app.learners.base import Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store.keys import ModelKeys
from app.store.paging import take_page
from app.store.results import ScriptResult
from app.store.snapshots import PublishConflict
from app.store.versions import RESTORED_CONFIG_FIELDS, RollbackRefused, VersionPolicy

#: Publish attempts of an explicit change racing the trainer's publishes.
PUBLISH_ATTEMPTS = 20


async def keep_explicit(ctx: ApiContext, mk: ModelKeys, config: ModelConfig, version: int,
                        reason: str) -> None:
    """Keep ``version`` just published by a create (``reason``) whatever the interval (not if
    the trainer published meanwhile); the other explicit changes keep theirs in the step
    that publishes it."""
    await ctx.store.versions.keep(mk, VersionPolicy.of(config), reason=reason, interval=0.0,
                                  expected_version=version)


async def publish_explicit(ctx: ApiContext, tenant: str, config: ModelConfig,
                           state: dict[str, np.ndarray], reason: str,
                           marker: str = "") -> int:
    """Publish ``state``, built for ``config``, as the model's new version (any trainer's batch
    in flight is refused and learned again on top of it), kept (``reason``) and with the
    decision-log marker ``marker`` ("" = none) in the same step, drop the cached learner;
    returns the version.  Only while the model still has the algorithm and params of
    ``config``: a promotion or rollback meanwhile (409 ``model_changed``) would otherwise get
    a state of another algorithm under its config."""
    mk = ModelKeys(tenant, config.model_id)
    for _ in range(PUBLISH_ATTEMPTS):
        found = await ctx.store.models.config_and_version(mk)
        if found is None:
            raise unknown_model(config.model_id)
        current, expected = found
        if any(getattr(current, name) != getattr(config, name)
               for name in RESTORED_CONFIG_FIELDS):
            raise ApiError(409, "model_changed", "the model's algorithm or params changed "
                           "during the call (a promotion or rollback); try again")
        try:
            version = await ctx.store.versions.publish(mk, state, expected,
                                                       VersionPolicy.of(config), reason, marker)
        except PublishConflict as exc:
            if exc.code is ScriptResult.GONE:
                raise unknown_model(config.model_id) from None
            continue  # the trainer published meanwhile: read again
        ctx.cache.forget(tenant, config.model_id)
        return version
    raise ApiError(503, "store_busy", "the model kept changing; retry",
                   headers={"Retry-After": "1"})


async def reconfigure(ctx: ApiContext, tenant: str, model_id: str,
                      change: Callable[[ModelConfig], ModelConfig],
                      adjust: Callable[[Learner], None] | None = None
                      ) -> tuple[ModelConfig, Learner]:
    """Store ``change(the stored config)``, then publish the model's state rebuilt under the
    new config (``adjust`` applied to the learner) at the version it was read at, so that
    every worker reloads the learner with the new params; redone on the trainer's state when
    it published meanwhile (its events are never lost).  Returns the config stored and the
    learner published."""
    # on the config stored when writing: a rollback meanwhile keeps its params
    config = await change_config(ctx, tenant, model_id, change)
    mk = ModelKeys(tenant, model_id)
    for _ in range(PUBLISH_ATTEMPTS):
        snap = await ctx.store.snapshots.load(mk)
        if snap is None:
            raise unknown_model(model_id)
        learner = build_learner(config, snap.state)
        if adjust is not None:
            adjust(learner)
        try:
            await ctx.store.snapshots.publish(mk, learner.get_state(),
                                              expected_version=snap.version)
        except PublishConflict as exc:
            if exc.code is ScriptResult.GONE:
                raise unknown_model(model_id) from None
            continue  # the trainer published meanwhile: redo on its state
        ctx.cache.forget(tenant, model_id)
        return config, learner
    raise ApiError(503, "store_busy", "the model kept changing; retry",
                   headers={"Retry-After": "1"})


async def list_versions(ctx: ApiContext, tenant: str, model_id: str, limit: int,
                        before: int | None) -> VersionsResponse:
    """The kept versions older than ``before``, newest first: at most ``limit`` and
    :data:`~app.store.paging.MAX_PAGE_BYTES` of them (``next_before`` reads on)."""
    mk = ModelKeys(tenant, model_id)
    current = await ctx.store.snapshots.version(mk)
    if current is None:
        raise unknown_model(model_id)
    kept, more = await take_page(ctx.store.versions.newest(mk, before), limit)
    return VersionsResponse(version=current, versions=[
        KeptVersionResponse(version=k.version, created_at=k.created_at,
                            events_applied=k.events_applied, current=k.version == current,
                            reason=k.reason)
        for k in kept], next_before=kept[-1].version if more and kept else None)


async def rollback(ctx: ApiContext, tenant: str, config: ModelConfig,
                   version: int) -> RollbackResponse:
    """Publish kept ``version`` as a new version (404 naming ``version`` when it is not kept,
    409 when the model's config changed meanwhile), marked in the decision log and kept
    with the state it replaces in the same step."""
    model_id = config.model_id
    mk = ModelKeys(tenant, model_id)
    try:
        new = await ctx.store.versions.rollback(mk, version)
    except RollbackRefused as exc:
        if exc.code is ScriptResult.NOT_KEPT:
            raise ApiError(404, "unknown_version", f"version {version} is not kept "
                           "(GET .../versions lists the kept ones)", "version") from None
        if exc.code is ScriptResult.MOVED:
            raise ApiError(409, "rollback_conflict", "the model's config changed during the "
                           "rollback; try again") from None
        raise unknown_model(model_id) from None
    ctx.cache.forget(tenant, model_id)
    return RollbackResponse(version=new, rolled_back_to=version)
