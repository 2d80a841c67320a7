"""Schemas of the noise-rate routes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.api.schemas.common import FiniteFloat, RequestModel


class NoisePutRequest(RequestModel):
    """Configured click-noise rates: each in [0, 1), rho0 + rho1 < 1."""

    rho0: FiniteFloat = Field(ge=0.0, lt=1.0)
    rho1: FiniteFloat = Field(ge=0.0, lt=1.0)


class NoiseJobResponse(BaseModel):
    """A queued NREst run."""

    job_id: str
