"""What one tenant may hold: the refusal of a request past a limit (Settings
``max_models_per_tenant``, ``max_challengers_per_model``, ``max_pending_per_model``,
``max_context_bytes``; the request size is ``max_body_bytes``), counted on the
``tenant_limit_reached`` metric."""

from __future__ import annotations

from app.api.context import ApiContext
from app.api.errors import ApiError
from app.store.events import HoldLimitReached

#: The setting, status and message of each bound a decision's log step checks.
_HOLD_LIMITS = {
    "pending": ("max_pending_per_model", 429,
                "the model holds {held} decisions awaiting feedback, at most {most}: send "
                "their feedback or wait for their deadlines"),
    "context_bytes": ("max_context_bytes", 413,
                      "a decision's stored context takes {held} bytes, at most {most}"),
}


def limit_reached(ctx: ApiContext, tenant: str, limit: str, message: str, field: str | None,
                  *, code: str = "limit_reached", status: int = 409) -> ApiError:
    """The error (409 unless ``status``) naming the setting ``limit`` that refuses the
    request (``code`` its error code), counted on ``tenant_limit_reached{tenant, limit}``."""
    ctx.metrics.limit_reached.labels(tenant, limit).inc()
    return ApiError(status, code, f"{message} (limit {limit})", field)


def hold_limit_reached(ctx: ApiContext, tenant: str, exc: HoldLimitReached) -> ApiError:
    """The refusal of decisions whose log step passed a bound (:data:`_HOLD_LIMITS`)."""
    setting, status, message = _HOLD_LIMITS[exc.limit]
    return limit_reached(ctx, tenant, setting, message.format(held=exc.held, most=exc.most),
                         None, status=status)
