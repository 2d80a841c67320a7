"""Types shared by the request and response schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

#: A JSON number that must be finite (NaN and +-Infinity are refused).
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: A non-negative JSON integer (booleans refused).
Index = Annotated[int, Field(strict=True, ge=0)]

MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

ModelId = Annotated[str, StringConstraints(pattern=MODEL_ID_PATTERN)]
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
EventId = Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    """What went wrong: a snake_case code, a sentence, the JSON path of the culprit."""

    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """The one error shape of every endpoint."""

    error: ErrorDetail
