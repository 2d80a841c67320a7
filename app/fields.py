"""Field types shared by the request and response schemas of the API and of the tasks
(pure pydantic: a task declares its schemas with them without importing the API).

Features come dense (a list of ``n_features`` numbers), sparse (``indices``
and ``values``) or named (``{"named": {name: value}}``, hashed into
``n_features`` buckets, see :mod:`app.features`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)

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


#: Request-size limits of the published contract (docs/architecture.md), fixed in
#: the schema so that they appear in the OpenAPI document and hold before any work.
MAX_DENSE = 1_000_000
MAX_NAMED = 10_000
MAX_NAME_CHARS = 256
FeatureName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
#: A named feature's string value (one-hot encoded by the name/value pair).
NameValue = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)]


class SparseFeatures(RequestModel):
    """Non-zero entries by index."""

    indices: list[FeatureIndex] = Field(max_length=MAX_DENSE)
    values: list[FiniteFloat] = Field(max_length=MAX_DENSE)

    @model_validator(mode="after")
    def _same_length(self) -> SparseFeatures:
        if len(self.indices) != len(self.values):
            raise ValueError("indices and values must have the same length")
        return self


class NamedFeatures(RequestModel):
    """Named features, hashed with signed murmurhash3 (as scikit-learn's FeatureHasher).

    A string value ``{"country": "FR"}`` is the feature ``"country=FR"`` with value 1.
    """

    named: dict[FeatureName, FiniteFloat | NameValue] = Field(max_length=MAX_NAMED)


def _features_kind(value: Any) -> str | None:
    if isinstance(value, list):
        return "<dense>"
    if isinstance(value, dict):
        return "<named>" if "named" in value else "<sparse>"
    if isinstance(value, BaseModel):
        return "<named>" if isinstance(value, NamedFeatures) else "<sparse>"
    return None


Features = Annotated[
    Annotated[list[FiniteFloat], Tag("<dense>"), Field(max_length=MAX_DENSE)]
    | Annotated[SparseFeatures, Tag("<sparse>")]
    | Annotated[NamedFeatures, Tag("<named>")],
    Discriminator(_features_kind, custom_error_type="invalid_features",
                  custom_error_message="features must be a list of numbers, "
                                       "{indices, values} or {named}"),
]

#: Most noisy labels or noisy copies in one feedback event.
MAX_PARTS = 1000
