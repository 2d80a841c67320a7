"""Schemas of ``GET/PUT /v1/models/{id}/confusion``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.api.schemas.common import MAX_CLASSES, FiniteFloat, RequestModel


class ConfusionPutRequest(RequestModel):
    """The client's confusion matrix, or ``null`` to go back to estimating it from gold examples.

    ``matrix[p][q] = P(noisy label p | true class q)``: rows are observed
    (noisy) labels, columns true classes; every column sums to 1; the matrix
    must be invertible and well conditioned.
    """

    matrix: list[Annotated[list[FiniteFloat], Field(min_length=2, max_length=MAX_CLASSES)]] | None \
        = (
        Field(min_length=2, max_length=MAX_CLASSES,
              description="n_classes rows of n_classes numbers (the model's n_classes)"))


class ConfusionResponse(BaseModel):
    """The confusion matrix UMA uses now."""

    matrix: list[list[float]] = Field(description="rows = noisy label p, columns = true class q")
    source: Literal["configured", "estimated"] = Field(
        description="configured: set with PUT; estimated: from gold examples")
    n_gold: int = Field(description="gold examples received")
    ready: bool = Field(description="false while the estimate is not usable yet (too few gold "
                                    "examples per class, or not invertible): UMA then uses the "
                                    "identity, i.e. learns from the noisy labels as they are")
    message: str | None = Field(default=None, description="why the estimate is not used yet")
