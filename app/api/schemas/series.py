"""Schemas of a model's quality series (``GET /v1/models/{id}/series``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.api.schemas.noise import SlotNoise


class SeriesPoint(BaseModel):
    """One point of the series: the trainer's window since the previous point."""

    t: float = Field(description="Unix time of the point, in seconds")
    version: int = Field(description="the snapshot version published last in the window")
    events_applied: int = Field(description="events the model has learned from, in all")
    events: int = Field(description="events applied in the window")
    events_per_second: float = Field(description="events applied per second in the window")
    online_reward: float | None = Field(
        description="mean observed click of the window's applied events (null without clicks)")
    calibrated_reward: float | None = Field(
        description="online_reward noise-corrected, h(f), with the rates in force")
    debiased_reward: float | None = Field(
        description="h of the mean observed click over every applied event")
    rho0: float | None = Field(description="false-click rate in force (null: no noise rates)")
    rho1: float | None = Field(description="missed-click rate in force")
    noise_source: str | None = Field(description="initial, configured or estimated")
    rho0_interval: list[float] | None = Field(
        description="[low, high] of a published anchor estimate of rho0")
    rho1_interval: list[float] | None = Field(
        description="[low, high] of a published anchor estimate of rho1")
    calibration_unreliable: bool = Field(
        default=False, description="the rewards rest on rates nobody stands behind (initial "
                                   "rates awaiting an estimate, an estimate without an "
                                   "interval, or one withdrawn): see reason")
    reason: str | None = Field(
        default=None, description="why calibration_unreliable: noise_rates_unreliable, "
                                  "no_interval (an estimate published without an interval, "
                                  "NREst's) or noise_rates_withdrawn (an estimate a later "
                                  "refresh withdrew, GET .../noise withdrawn)")
    pending: int = Field(description="decisions awaiting feedback")
    backlog: int = Field(description="accepted events not yet applied")
    position_bias: list[float] | None = Field(
        default=None, description="rank models: theta of each slot relative to slot 0")
    position_bias_source: str | None = Field(
        default=None, description="rank models: estimated (the per-slot estimate in force), "
                                  "configured or insufficient_data")
    slots: list[SlotNoise] | None = Field(
        default=None, description="rank models: the per-slot estimate published since the "
                                  "previous point (theta, rho0, rho1 and their intervals, as "
                                  "GET .../noise slots); null on the other points")
    slots_status: str | None = Field(
        default=None, description="rank models: published, insufficient_data or fixed (the "
                                  "noise status)")
    slots_reason: str | None = Field(
        default=None, description="rank models: why the last per-slot estimate was not "
                                  "published (empty when it was)")


class SeriesResponse(BaseModel):
    """The newest points of a model's series, oldest first (at most ``limit`` and
    :data:`~app.store.paging.MAX_PAGE_BYTES` of their JSON)."""

    points: list[SeriesPoint]
    next_before: float | None = Field(
        default=None, description="pass as `before` for the older points (the page was cut "
                                  "by `limit` or by bytes); null when no older point is left")
