"""Schemas of the challenger routes (list, add, promote)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.api.schemas.common import RequestModel

#: A challenger's name (never starts with "_": the store keeps the champion's sums there).
CHALLENGER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
ChallengerName = Annotated[str, StringConstraints(pattern=CHALLENGER_NAME_PATTERN)]


class ChallengerCreateRequest(RequestModel):
    """Body of ``POST /v1/models/{id}/challengers``: a configuration of the model's task."""

    name: ChallengerName
    algorithm: str = Field(description="one of the model's task's algorithms")
    params: dict[str, Any] = Field(default_factory=dict, max_length=64)


class PromoteRequest(RequestModel):
    """Body of ``POST /v1/models/{id}/promote``."""

    challenger: ChallengerName
    previous_as: ChallengerName | None = Field(
        default="previous", description="name under which the old champion stays as a "
        "challenger (its config and state at the promotion); null drops it")


class ValueInterval(BaseModel):
    """An estimate with its 95% interval (normal approximation; null before enough events)."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None


class ChampionValue(BaseModel):
    algorithm: str
    params: dict[str, Any]
    events: int = Field(description="events the challengers followed (the champion's value "
                        "is its mean reward on them)")
    value: ValueInterval


class ChallengerView(BaseModel):
    name: str
    algorithm: str
    params: dict[str, Any]
    created_at: str
    status: Literal["waiting", "following", "failed"] = Field(
        description="waiting: no batch followed yet; failed: skipped since `error`")
    error: str | None
    events: int = Field(description="events scored (each before the challenger learned it)")
    value: ValueInterval = Field(description="SNIPS estimate of its value (mean reward)")
    ips: ValueInterval = Field(description="IPS estimate of its value")
    vs_champion: ValueInterval = Field(description="value minus the champion's on the same "
                                       "events")


class ChallengersResponse(BaseModel):
    champion: ChampionValue
    challengers: list[ChallengerView]
    max_challengers: int
    level: float = Field(description="confidence level of every interval")
    calibration_unreliable: bool = Field(
        default=False, description="the rewards h(f) of the values (at the rates in force "
        "when read, a published estimate's error in the intervals) rest on noise rates that "
        "are not reliable (reason noise_rates_unreliable), are an estimate whose error is "
        "not known (reason noise_rates_estimated: NREst gives no interval) or one a later "
        "refresh withdrew (reason noise_rates_withdrawn)")
    reason: str | None = Field(default=None, description="why calibration_unreliable")


class PromoteResponse(BaseModel):
    version: int = Field(description="the new snapshot version (the promoted state)")
    algorithm: str
    params: dict[str, Any]
    previous_as: str | None = Field(description="the challenger that holds the old champion")
