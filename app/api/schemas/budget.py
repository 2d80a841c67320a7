"""Schema of ``GET /v1/models/{id}/label-budget``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LabelBudgetResponse(BaseModel):
    """A regression model's label budget and how much of it was spent."""

    budget: float
    strategy: str
    rounds: int = Field(description="events whose first label arrived")
    labels_used: int = Field(description="labels charged: 1 per round plus those asked for")
    a: float | None = Field(default=None, description="current `a` of the auto strategies")
