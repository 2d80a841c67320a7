"""What one tenant may hold: the refusal of a request past a limit (Settings
``max_models_per_tenant``, ``max_challengers_per_model``, ``max_pending_per_model``,
``max_context_bytes``, ``max_evaluation_bytes``, ``max_queued_evaluations_per_model``;
the request size is
``max_body_bytes``), counted on the ``tenant_limit_reached`` metric."""

from __future__ import annotations

from app.api.context import ApiContext
from app.api.errors import ApiError
from app.evaluation.estimators import Options
from app.evaluation.reward_model import reward_dim
from app.learners.config import ModelConfig
from app.store.evaluations import TooManyQueued
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


def check_evaluation_size(ctx: ApiContext, tenant: str, config: ModelConfig) -> None:
    """Refuse (422) an evaluation whose doubly robust reward model would pass
    ``max_evaluation_bytes``: it holds ``X'X`` per fold and label (or slot), ``d x d``
    float64 whatever the form of the log's lines (``d``: the context's width, or the
    buckets a wide context is hashed to, :func:`app.evaluation.reward_model.reward_dim`)."""
    d = reward_dim(config.n_features)
    groups = int(config.n_classes or config.params.get("slots") or 1)
    need = Options().folds * groups * d * d * 8
    most = ctx.settings.max_evaluation_bytes
    if need > most:
        raise limit_reached(ctx, tenant, "max_evaluation_bytes",
                            f"the reward model of an evaluation of this model takes "
                            f"{need / 2**30:,.1f} GiB ({groups} x {Options().folds} folds of "
                            f"{d} x {d} float64), at most {most / 2**30:,.1f} GiB", "policy",
                            status=422)


def queued_limit_reached(ctx: ApiContext, tenant: str, exc: TooManyQueued) -> ApiError:
    """The refusal (429) of an evaluation past ``max_queued_evaluations_per_model``."""
    return limit_reached(ctx, tenant, "max_queued_evaluations_per_model",
                         f"the model holds {exc.held - 1} queued evaluations, at most {exc.most}: "
                         "wait for one to start", None, status=429)
