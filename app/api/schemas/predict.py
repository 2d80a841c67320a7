"""Schemas of ``POST /v1/models/{id}/predict``.

Features come dense (a list of ``n_features`` numbers), sparse (``indices``
and ``values``) or named (``{"named": {name: value}}``, hashed into
``n_features`` buckets, see :mod:`app.api.features`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.schemas.common import (
    ClassIndex,
    FeatureIndex,
    FiniteFloat,
    RequestModel,
    exactly_one_of,
    one_of_schema,
)
from app.learners.proxy import CALIBRATION_BETA_MIN
from app.settings import MAX_BATCH

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


#: What ``defer`` does (predict and rank).
DEFER_DESCRIPTION = ("true: the decision is logged but awaits POST .../events/{event_id}/activate "
                     "(e.g. once it was shown): until then feedback is refused (409 "
                     "not_activated) and no default is made; never activated, it expires "
                     "unlearned after the model's wait_seconds plus the context grace period")


class PredictRequest(RequestModel):
    """One decision (``features``) or many (``instances``, 1 to 1000).

    Each feature list must have the model's ``n_features`` numbers and each
    sparse index be below it (checked against the model: 422 ``invalid_features``).
    """

    model_config = ConfigDict(json_schema_extra=one_of_schema("features", "instances"))

    features: Features | SkipJsonSchema[None] = None
    instances: Annotated[list[Features], Field(min_length=1, max_length=MAX_BATCH)] | (
        SkipJsonSchema[None]) = None
    explore: bool = Field(default=True, description="false: greedy decision, nothing logged "
                                                    "(no event_id, no feedback expected)")
    defer: bool = Field(default=False, description=DEFER_DESCRIPTION)
    baseline: ClassIndex | Annotated[list[ClassIndex],
                                     Field(min_length=1, max_length=MAX_BATCH)] | (
        SkipJsonSchema[None]) = Field(
        default=None, description="a model in apprentice mode: the caller's own label, served "
                                  "and learned from (with instances: one per instance); "
                                  "ignored in online mode")

    @model_validator(mode="after")
    def _one_form(self) -> PredictRequest:
        exactly_one_of(self, ("features", "instances"),
                       "give exactly one of 'features' or 'instances'")
        return self


class LabelPrediction(BaseModel):
    """A decision of the ``label`` task."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    label: int
    probability: float
    greedy_label: int
    model_version: int
    expected_reward: float | None = Field(
        default=None, description="ridge learners: the calibrated click probability of the "
                                  "played label, (mu - rho0) / (1 - rho0 - rho1) clipped to [0, 1]")
    calibration_unreliable: bool | None = Field(
        default=None, description=f"with expected_reward: true while the noise rates await "
                                  f"an estimate (noise status insufficient_data) or when "
                                  f"1 - rho0 - rho1 < {CALIBRATION_BETA_MIN}, where dividing by "
                                  "it magnifies every error of the predicted rate")


class LabelSetPrediction(BaseModel):
    """A decision of the ``label_set`` task: ``m`` labels in draw order."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    labels: list[int]
    probability: float
    greedy_labels: list[int]
    model_version: int


class RegressionPrediction(BaseModel):
    """A decision of the ``regression`` task: the predicted value."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    value: float
    model_version: int


class NoisyLabelPrediction(BaseModel):
    """A decision of the ``noisy_label`` task: the predicted true class."""

    event_id: str | None = Field(default=None, description="absent with explore: false")
    label: int
    model_version: int


class NoisyInputPrediction(BaseModel):
    """A decision of the ``noisy_input`` task, made from one noisy copy.

    ``copies_needed``: further noisy copies of the instance the feedback must
    carry for this round's unbiased update; ``label`` (the sign of
    ``value``) for classification losses.
    """

    event_id: str | None = Field(default=None, description="absent with explore: false")
    value: float
    copies_needed: int
    label: int | None = None
    model_version: int


Prediction = (LabelPrediction | LabelSetPrediction | RegressionPrediction | NoisyLabelPrediction
              | NoisyInputPrediction)


class PredictionBatchResponse(BaseModel):
    """Decisions for ``instances``, in order."""

    predictions: list[Prediction]
