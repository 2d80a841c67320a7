"""A change of a model's stored config, as every route that makes one answers it."""

from __future__ import annotations

from collections.abc import Callable

from app.api.context import ApiContext
from app.api.errors import ApiError, unknown_model
from app.learners.config import ModelConfig
from app.store.models import ConfigBusy


async def change_config(ctx: ApiContext, tenant: str, model_id: str,
                        change: Callable[[ModelConfig], ModelConfig | None]) -> ModelConfig:
    """Store ``change(the config stored now)`` (compared and set: see
    :meth:`app.store.models.ModelStore.update_config`) and drop the API's cached model;
    returns the config now stored.  503 ``store_busy`` when the config kept changing, 404
    when the model is gone."""
    try:
        stored = await ctx.store.models.update_config(tenant, model_id, change)
    except ConfigBusy:
        raise ApiError(503, "store_busy", "the model's config kept changing; retry",
                       headers={"Retry-After": "1"}) from None
    if stored is None:
        raise unknown_model(model_id)
    ctx.cache.forget(tenant, model_id)
    return stored
