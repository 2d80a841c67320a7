"""Schemas of the policy-evaluation routes."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from app.api.schemas.common import FiniteFloat, JsonInt, RequestModel


class PolicyConfig(RequestModel):
    """A model configuration to train on the earlier part of the log and evaluate on the
    rest."""

    algorithm: str = Field(max_length=40, description="an algorithm of the model's task that "
                           "learns from what its log holds (a click; a continuous model's "
                           "reward)")
    params: dict[str, Any] = Field(default_factory=dict, max_length=64,
                                   description="its hyper-parameters (as at model creation)")


def _policy_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "<name>"
    return "<config>" if isinstance(value, dict | PolicyConfig) else None


#: The named target policies (``fixed:N``: always label N; a continuous model's ``fixed:V``
#: a value, decimals allowed).
POLICY_NAMES = r"^(uniform|logging|model|model:greedy|fixed:-?[0-9]{1,6}(\.[0-9]{1,9})?)$"


def _policy_name(value: str) -> str:
    """``value`` if it is a named policy, else a ValueError saying what is expected."""
    if re.match(POLICY_NAMES, value):
        return value
    if value.startswith("fixed:"):
        raise ValueError(f"{value!r}: fixed:N always plays the label numbered N (0 to 999999) "
                         "of a label model, so N is a number, not an item id")
    raise ValueError(f"unknown policy {value!r}: expected uniform, logging, model, "
                     "model:greedy, fixed:N (N a label number) or {algorithm, params}")


#: A named target policy or a configuration.
Policy = Annotated[
    Annotated[str, Field(json_schema_extra={"pattern": POLICY_NAMES}),
              AfterValidator(_policy_name), Tag("<name>")]
    | Annotated[PolicyConfig, Tag("<config>")],
    Discriminator(_policy_kind, custom_error_type="invalid_policy",
                  custom_error_message="policy is a name or {algorithm, params}"),
]


class EvaluationRequest(RequestModel):
    """A policy to evaluate on the model's decision log (label models; rank models per slot)."""

    policy: Policy = Field(
        description="uniform, logging, fixed:N (always label N), model (the model's current "
                    "snapshot as it explores: its probability of each label on each logged "
                    "context), model:greedy (its greedy label), or a configuration "
                    "{algorithm, params}: a learner of it learns the first train_fraction of "
                    "the events, off-policy, and is evaluated on the rest")
    train_fraction: FiniteFloat | None = Field(
        default=None, gt=0.0, lt=1.0,
        description="with a configuration: the share of the events (oldest first) it learns "
                    "from (default 0.5)")
    since: str | None = Field(
        default=None, max_length=40,
        description="only events applied at or after (ISO 8601, naive = UTC, or Unix seconds)")
    until: str | None = Field(default=None, max_length=40,
                              description="only events applied at or before (as since)")
    rho0: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0,
                                     description="click-noise rate P(click | no true click); "
                                     "without rates the log is corrected by the model's own "
                                     "(a rank model's: its per-slot estimate when published); "
                                     "a rank model's given rates are every slot's, under its "
                                     "estimated examination")
    rho1: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0,
                                     description="click-noise rate P(no click | true click)")
    bootstrap: JsonInt = Field(default=200, ge=1, le=1000,
                           description="bootstrap resamples per interval")

    @model_validator(mode="after")
    def _rates_together(self) -> EvaluationRequest:
        if (self.rho0 is None) != (self.rho1 is None):
            raise ValueError("give both rho0 and rho1, or neither")
        if self.train_fraction is not None and isinstance(self.policy, str):
            raise ValueError("train_fraction goes with a configuration policy")
        return self


class EvaluationJob(BaseModel):
    """An evaluation's status; once ``done``, the fields of ``noisyloop evaluate --json``
    (``ips``, ``snips``, ``dr``, ``n``, ``ess``, ``correction``, ``policy``, ...)."""

    model_config = ConfigDict(extra="allow")

    job_id: str
    status: str = Field(description="queued, running, done or failed")
    error: str | None = Field(default=None, description="why it failed")
