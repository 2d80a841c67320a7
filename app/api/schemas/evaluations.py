"""Schemas of the policy-evaluation routes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.common import FiniteFloat, JsonInt, RequestModel


class EvaluationRequest(RequestModel):
    """A policy to evaluate on the model's decision log (label models)."""

    policy: str = Field(
        pattern=r"^(uniform|logging|model|model:greedy|fixed:[0-9]{1,6})$",
        description="uniform, logging, fixed:N (always label N), model (the model's current "
                    "snapshot as it explores: its probability of each label on each logged "
                    "context) or model:greedy (its greedy label)")
    since: str | None = Field(
        default=None, max_length=40,
        description="only events applied at or after (ISO 8601, naive = UTC, or Unix seconds)")
    rho0: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0,
                                     description="click-noise rate P(click | no true click)")
    rho1: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0,
                                     description="click-noise rate P(no click | true click)")
    bootstrap: JsonInt = Field(default=200, ge=1, le=1000,
                           description="bootstrap resamples per interval")

    @model_validator(mode="after")
    def _rates_together(self) -> EvaluationRequest:
        if (self.rho0 is None) != (self.rho1 is None):
            raise ValueError("give both rho0 and rho1, or neither")
        return self


class EvaluationJob(BaseModel):
    """An evaluation's status; once ``done``, the fields of ``noisyloop evaluate --json``
    (``ips``, ``snips``, ``dr``, ``n``, ``ess``, ``correction``, ``policy``, ...)."""

    model_config = ConfigDict(extra="allow")

    job_id: str
    status: str = Field(description="queued, running, done or failed")
    error: str | None = Field(default=None, description="why it failed")
