"""Types shared by the request and response schemas (defined in :mod:`app.fields`, which
the tasks' schemas use too)."""

from __future__ import annotations

from app.fields import (
    EVENT_ID_PATTERN,
    INTEGRAL,
    MAX_CLASSES,
    MAX_FEATURES,
    MODEL_ID_PATTERN,
    TENANT_ID_PATTERN,
    ClassIndex,
    ErrorDetail,
    ErrorResponse,
    EventId,
    FeatureIndex,
    FiniteFloat,
    JsonInt,
    ModelId,
    RequestModel,
    TenantId,
    exactly_one_of,
    one_of_schema,
)

__all__ = [
    "EVENT_ID_PATTERN",
    "INTEGRAL",
    "MAX_CLASSES",
    "MAX_FEATURES",
    "MODEL_ID_PATTERN",
    "TENANT_ID_PATTERN",
    "ClassIndex",
    "ErrorDetail",
    "ErrorResponse",
    "EventId",
    "FeatureIndex",
    "FiniteFloat",
    "JsonInt",
    "ModelId",
    "RequestModel",
    "TenantId",
    "exactly_one_of",
    "one_of_schema",
]
