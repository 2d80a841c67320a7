"""Schemas of a model's serving mode (online, apprentice or logging) and of deferred decisions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.api.schemas.common import RequestModel

Mode = Literal["online", "apprentice", "logging"]
MODE_DESCRIPTION = ("online: the model serves its own decisions; apprentice: it serves the "
                    "baseline each request carries, learns from its feedback and reports how "
                    "often it agrees (GET .../{model_id}: apprentice); logging: as apprentice, "
                    "but its feedback is only logged and counted, the weights stay")


class ModeRequest(RequestModel):
    """Body of ``PUT /v1/models/{id}/mode``."""

    mode: Mode = Field(description=MODE_DESCRIPTION)


class ApprenticeReport(BaseModel):
    """What a model learned while serving its callers' baselines (apprentice mode).

    The baseline is served deterministically, so the model's own choices are
    observed only where they agree with it: ``model_value_estimate`` is the
    mean reward on those events, the model's value on that share of the
    traffic; where it would have served something else, nothing was observed.
    """

    decisions: int = Field(description="decisions made in apprentice mode")
    agreement: float | None = Field(
        description="share of them where the model's own greedy choice (slot 0 of a ranking) "
                    "was the baseline's; null before any")
    events: int = Field(description="apprentice decisions whose feedback was accepted")
    baseline_reward: float | None = Field(
        description="mean observed reward (click; slot 0's for a ranking) over those events: "
                    "the baseline's value; null before any")
    agreed_events: int = Field(description="those events where the model agreed")
    model_value_estimate: float | None = Field(
        description="mean observed reward over the events where the model agreed: its value "
                    "where it is identifiable, not over all traffic; null before any")


class ActivateResponse(BaseModel):
    """A deferred decision, now awaiting feedback until ``deadline``."""

    event_id: str
    active: bool = True
    deadline: int = Field(description="Unix seconds (the store's clock) when its wait for "
                                      "feedback ends")
