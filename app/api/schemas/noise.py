"""Schemas of the noise-rate routes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from app.api.schemas.common import FiniteFloat, RequestModel
from app.api.schemas.models import NoiseResponse

Estimator = Literal["anchor", "nrest", "fixed"]


class NoisePutRequest(RequestModel):
    """Configured click-noise rates (each in [0, 1), rho0 + rho1 < 1; both or neither), the
    estimator, and the widest interval an anchor estimate may have to be published."""

    rho0: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0)
    rho1: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0)
    estimator: Estimator | None = Field(
        default=None, description="anchor (default), nrest (the paper's NREst) or fixed "
                                  "(never re-estimated)")
    max_width: FiniteFloat | None = Field(
        default=None, gt=0.0, le=1.0,
        description="widest confidence interval of either rate still published (anchor)")
    half_life: Literal[0] | Annotated[FiniteFloat, Field(ge=1.0, le=1e12)] | None = Field(
        default=None,
        description="anchor: plays after which a play weighs half in the estimate, so that a "
                    "change in how people click is followed (at least 1; null: every play "
                    "of the newest 50,000 alike, the default, as a learner's half_life "
                    "null never forgets; 0, the older spelling of null, is accepted)")
    one_right_label: bool | None = Field(
        default=None,
        description="anchor: whether every input has exactly one right label (the labels "
                    "are classes, one of them right), the assumption without which no "
                    "anchor estimate is published; null: as the algorithm's setting says "
                    "(true for rcnbf, rcine and soba, false for the ridge bandits)")

    @model_validator(mode="after")
    def _rates_together(self) -> NoisePutRequest:
        if (self.rho0 is None) != (self.rho1 is None):
            raise ValueError("give both rho0 and rho1, or neither")
        if (self.rho0 is None and self.estimator is None and self.max_width is None
                and not {"half_life", "one_right_label"} & self.model_fields_set):
            raise ValueError("give rho0 and rho1, estimator, max_width, half_life or "
                             "one_right_label")
        return self

    def half_life_setting(self) -> float | None:
        """The anchor half-life to store: None when the body does not give one (unchanged),
        0.0 for ``null`` or ``0`` (the default back: every play alike), else the value."""
        if "half_life" not in self.model_fields_set:
            return None
        return self.half_life or 0.0


class NoiseInterval(BaseModel):
    """Confidence interval of a published anchor estimate."""

    level: float
    rho0: tuple[float, float] | None = None
    rho1: tuple[float, float] | None = None


class SlotInterval(BaseModel):
    """Confidence intervals of one slot's parameters."""

    theta: tuple[float, float]
    rho0: tuple[float, float]
    rho1: tuple[float, float]


class SlotPublished(BaseModel):
    """Which of one slot's parameters are published (examination has its own gate)."""

    theta: bool = True
    rho0: bool = True
    rho1: bool = True


class SlotWidths(BaseModel):
    """Width of each of one slot's intervals."""

    theta: float
    rho0: float
    rho1: float


class SlotNoise(BaseModel):
    """Examination and click noise of one slot (rank models): an item shown in ``slot`` with
    relevance ``R`` is clicked with probability ``theta (R (1 - rho1) + (1 - R) rho0)``."""

    slot: int
    theta: float = Field(description="examination probability relative to slot 0")
    rho0: float = Field(description="chance an examined irrelevant item is clicked here")
    rho1: float = Field(description="chance an examined relevant item is not clicked")
    interval: SlotInterval
    published: SlotPublished = Field(
        default_factory=SlotPublished,
        description="which values are published: theta once every slot's theta interval is "
                    "at most max_width wide; rho0 and rho1 with the whole estimate (status "
                    "published). A value not published is shown, not used, except the "
                    "rates of an estimate withdrawn (see withdrawn): in use, flagged")
    widths: SlotWidths | None = Field(default=None, description="each interval's width")
    too_wide: list[Literal["theta", "rho0", "rho1"]] = Field(
        default_factory=list, description="the parameters whose interval is wider than "
                                          "max_width (what keeps them unpublished)")
    bottom_fraction: float | None = Field(
        default=None, description="share of the lowest scores whose click rate gave the low "
                                  "end of rho0's interval: narrower than the bottom band "
                                  "(0.03) where the width allows, since relevant items in "
                                  "the band can only raise rho0; null in rows stored before")

    @model_validator(mode="after")
    def _widths_of_the_intervals(self) -> SlotNoise:
        if self.widths is None:  # rows stored before the widths were
            self.widths = SlotWidths(**{name: high - low for name, (low, high)
                                        in self.interval.model_dump().items()})
        return self


class NoiseStatusResponse(NoiseResponse):
    """Current rates, where they come from, and the state of their estimate."""

    estimator: Estimator = "anchor"
    max_width: float = 0.1
    half_life: float | None = Field(
        default=None, description="anchor: plays after which a play weighs half (null: "
                                  "every play alike)")
    one_right_label: bool | None = Field(
        default=None,
        description="anchor: whether every input is taken to have exactly one right label, "
                    "as the owner stated or else the algorithm's setting says; false: no "
                    "estimate is published (reason one_right_label_unstated); null for a "
                    "model whose estimate does not rest on it (rank, continuous)")
    status: Literal["published", "insufficient_data", "fixed"] = Field(
        description="published: the rates in use are an estimate; insufficient_data: no "
                    "estimate narrow enough yet (the configured or initial rates are in use), "
                    "or the estimate in use withdrawn (see withdrawn); fixed: rates are not "
                    "re-estimated")
    reason: str = ""
    withdrawn: str | None = Field(
        default=None,
        description="why a later refresh withdrew the estimate whose rates are in use "
                    "(anchor_not_flat: its assumptions are shown not to hold; "
                    "anchor_unchecked: they cannot be shown to hold); the learner keeps "
                    "learning with those rates, and every number they calibrate is flagged "
                    "until an estimate is published again; null when none is withdrawn")
    calibration_unreliable: bool = Field(
        default=False,
        description="the rates in use are not stood behind: initial rates awaiting an "
                    "estimate, rates nobody gave, an estimate without an interval (NREst's) "
                    "or withdrawn, rates no estimator can check (a continuous model's: "
                    "reason no_estimator), or 1 - rho0 - rho1 below 0.2 (as a model's stats "
                    "say)")
    interval: NoiseInterval | None = None
    n_events: int = Field(description="observed plays the last anchor estimate used (or kept "
                                      "so far, before the first)")
    slots: list[SlotNoise] | None = Field(
        default=None, description="rank models: the per-slot estimate in force (published "
                                  "whole: rho0 and rho1 above are then slot 0's; or its "
                                  "examination alone), else the last estimate's values, "
                                  "each flagged in published, with widths and too_wide; "
                                  "null before an estimate has values")


class NoiseOutcome(BaseModel):
    """What one run of the model's estimator found, published or not."""

    estimator: Literal["anchor", "nrest"]
    status: Literal["published", "insufficient_data"] = Field(
        description="published: its rates are now the model's; insufficient_data: the model "
                    "kept its rates (see reason)")
    reason: str = Field(description="why it was not published (too_few_events, "
                                    "interval_too_wide, no_uniform_exploration, or NREst's "
                                    "reason), clipped when a published estimate was clipped")
    rho0: float | None = None
    rho1: float | None = None
    n_events: int = Field(description="plays (anchor) or samples (nrest) it used")
    n_explored: int | None = Field(default=None, description="anchor: uniformly explored plays")
    n_top: int | None = Field(default=None, description="anchor: plays in the top set")
    n_bottom: int | None = Field(default=None, description="anchor of a rank model: shown "
                                                            "slots in the bottom score band")
    theta_published: bool | None = Field(
        default=None, description="anchor of a rank model: whether its examination passed "
                                  "its own gate (published even when the rates are not)")
    slots: list[SlotNoise] | None = Field(default=None, description="anchor of a rank model: "
                                                                     "per slot, published or "
                                                                     "not (flagged)")
    interval: NoiseInterval | None = Field(
        default=None, description="anchor: both intervals when published; nrest: none")


class NoiseEstimateResponse(NoiseStatusResponse):
    """The model's noise status after a requested estimate, and that estimate's outcome."""

    estimate: NoiseOutcome


class NoiseJobResponse(BaseModel):
    """A queued estimate of the model's own estimator."""

    job_id: str
