"""What one tenant may hold: the refusal of a request past a limit (Settings
``max_models_per_tenant``, ``max_challengers_per_model``; the request size is
``max_body_bytes``), counted on the ``tenant_limit_reached`` metric."""

from __future__ import annotations

from app.api.context import ApiContext
from app.api.errors import ApiError


def limit_reached(ctx: ApiContext, tenant: str, limit: str, message: str, field: str, *,
                  code: str = "limit_reached") -> ApiError:
    """The 409 naming the setting ``limit`` that refuses the request (``code`` its error
    code), counted on ``tenant_limit_reached{tenant, limit}``."""
    ctx.metrics.limit_reached.labels(tenant, limit).inc()
    return ApiError(409, code, f"{message} (limit {limit})", field)
