"""Types shared by the request and response schemas."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

#: Most features of a model and most classes of a classification model.
MAX_FEATURES = 1_000_000
MAX_CLASSES = 10_000

def _integral(value: Any) -> Any:
    """A float without a fraction as the integer it is (JSON schema's integers include 2.0)."""
    return int(value) if type(value) is float and value.is_integer() else value


#: A JSON number that must be finite (NaN and +-Infinity are refused; integers are numbers).
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: Makes an integer field take ``2.0`` as ``2`` (with ``Field(strict=True)``: never ``"2"``,
#: ``2.5`` or ``true``).  It goes after the ``Field`` of the bounds: pydantic publishes
#: bounds that come after it as non-standard keywords (``ge``, not ``minimum``).
INTEGRAL = BeforeValidator(_integral)
#: A JSON integer, bounds in the field's ``Field(...)``.
JsonInt = Annotated[int, Field(strict=True), INTEGRAL]
#: A feature index: below :data:`MAX_FEATURES`, the model's own ``n_features`` is checked
#: against the model.
FeatureIndex = Annotated[int, Field(strict=True, ge=0, lt=MAX_FEATURES), INTEGRAL]
#: A class label: below :data:`MAX_CLASSES`, the model's own ``n_classes`` is checked
#: against the model.
ClassIndex = Annotated[int, Field(strict=True, ge=0, lt=MAX_CLASSES), INTEGRAL]

MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

ModelId = Annotated[str, StringConstraints(pattern=MODEL_ID_PATTERN)]
TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
EventId = Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]


class RequestModel(BaseModel):
    """Base of request bodies: unknown fields are refused, types are strict.

    Strict: a string is never taken for a number or a boolean, nor a number
    for a boolean (``"explore": "no"`` is a 422 naming the field); a JSON
    integer is a valid number.
    """

    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorDetail(BaseModel):
    """What went wrong: a snake_case code, a sentence, the JSON path of the culprit."""

    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """The one error shape of every endpoint."""

    error: ErrorDetail


def exactly_one_of(model: BaseModel, names: tuple[str, ...], message: str) -> None:
    """ValueError(``message``) unless exactly one of the fields ``names`` was given, and
    none as an explicit null (the published schema has no null for them)."""
    given = [name for name in names if getattr(model, name) is not None]
    nulls = [name for name in names if name in model.model_fields_set
             and getattr(model, name) is None]
    if len(given) != 1:
        raise ValueError(message)
    if nulls:
        raise ValueError(f"{message}: omit {nulls[0]!r} rather than sending null")


def one_of_schema(*names: str) -> dict[str, Any]:
    """The JSON-schema addition saying that exactly one of the properties ``names`` is given."""
    return {"oneOf": [{"required": [name]} for name in names]}
