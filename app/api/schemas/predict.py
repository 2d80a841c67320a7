"""Schemas of ``POST /v1/models/{id}/predict``.

Features come dense, sparse or named (:data:`app.fields.Features`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.schemas.common import (
    ClassIndex,
    FiniteFloat,
    RequestModel,
    exactly_one_of,
    one_of_schema,
)
from app.fields import Features
from app.settings import MAX_BATCH
from app.tasks import prediction_union

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
    baseline: ClassIndex | FiniteFloat | Annotated[
        list[ClassIndex], Field(min_length=1, max_length=MAX_BATCH)] | Annotated[
        list[FiniteFloat], Field(min_length=1, max_length=MAX_BATCH)] | (
        SkipJsonSchema[None]) = Field(
        default=None, description="a model in apprentice mode: the caller's own label (a "
                                  "continuous model: its own action, a number in the range), "
                                  "served and learned from (with instances: one per "
                                  "instance); ignored in online mode")

    @model_validator(mode="after")
    def _one_form(self) -> PredictRequest:
        exactly_one_of(self, ("features", "instances"),
                       "give exactly one of 'features' or 'instances'")
        return self


#: A decision of any task but a ranking (each task's prediction model, from the registry:
#: the union documents the shapes; a decision is answered with its task's model).
if TYPE_CHECKING:  # a union built at run time: mypy sees a model
    Prediction = BaseModel
else:
    Prediction = prediction_union()


class PredictionBatchResponse(BaseModel):
    """Decisions for ``instances``, in order."""

    predictions: list[Prediction]
