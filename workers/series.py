"""The trainer's per-model quality series: a point per model every ``series_interval`` seconds
or every ``series_events`` events, whichever comes first.

After each published batch the trainer adds the batch's counters to the
model's open window (:class:`ModelSeries`, the feature's state of the model, in its
slot: :mod:`workers.feature`; a few additions: the series
must cost next to nothing beside learning).  Once the window is
``series_interval`` seconds old or holds ``series_events`` events (a burst
draws its curve, not two points and a line; a batch larger than that is one
point), :func:`record` closes it into a point,
appends it to the model's capped series (:class:`app.store.series.SeriesStore`)
and sets the quality gauges.  A model's first window in a worker closes after
:data:`FIRST_POINT_SECONDS` (a short burst still gets a point while it
learns), and at the end of each trainer pass :func:`record_idle` closes the
due windows of the models that applied nothing in it (a burst that ended):
so the newest point trails the model's ``events_applied`` by at most one
interval (and a trainer pass).  A point holds:

* ``t`` (Unix seconds), ``version``, ``events_applied`` (the model's total),
  ``events`` and ``events_per_second`` of the window;
* ``online_reward``: the mean observed click over the window's applied
  events (sweeper defaults included, as in ``debiased_reward``), and
  ``calibrated_reward``: its ``h(f)`` with the noise rates in force (both
  None without clicks, e.g. regression);
* ``debiased_reward``: ``h`` of the mean click over every applied event;
* ``rho0``/``rho1`` in force, their ``noise_source`` and, when they are a
  published anchor estimate, ``rho0_interval``/``rho1_interval``;
  ``calibration_unreliable`` and its ``reason`` when the rewards rest on rates
  nobody stands behind (:meth:`~app.store.noise.NoiseRecord.unreliable_reason`:
  ``noise_rates_unreliable``, or ``no_interval`` for an estimate without an
  interval, NREst's);
* ``pending`` (decisions awaiting feedback) and ``backlog`` (entries not yet
  applied);
* for a learner that declares ``estimates_position_bias`` (rank models):
  ``position_bias``, its ``theta`` per slot relative to slot 0, and
  ``position_bias_source``, by the rule every view of it follows
  (:func:`app.learners.noise_publish.position_bias`: the per-slot estimate in
  force, else configured, else insufficient_data);
* for a learner that declares ``logs_placements`` (rank models): ``slots``, the
  per-slot estimate (``theta``, ``rho0``, ``rho1`` and their intervals, as
  ``GET .../noise`` shows it) on the first point after each publish, null on
  the others (a publish is recorded once, so the capped series bounds them
  too); ``slots_status`` (published, insufficient_data or fixed, as ``GET
  .../noise``) and ``slots_reason``, why the last estimate was not published
  (empty when it was).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.learners.base import batch_size
from app.learners.config import ModelConfig
from app.learners.noise_anchor import TOO_FEW_EVENTS
from app.learners.noise_publish import position_bias
from app.learners.proxy import calibrated_probability
from app.store.delivery import TrainerView
from app.store.keys import ModelKeys
from app.store.noise import NoiseRecord
from app.store.series import SeriesContext
from app.store.snapshots import SnapshotInfo
from workers.context import ModelSlot, WorkerContext
from workers.feature import Feature, Published

#: Decimals kept of the rewards and rates of a point (the series is for reading, not sums).
DIGITS = 6
#: Seconds after which a model's first window in this worker closes (at most the interval).
FIRST_POINT_SECONDS = 1.0


@dataclass
class Window:
    """What a model's trainer applied since its last point."""

    started: float
    """``time.monotonic()`` when the window opened."""
    events: int = 0
    click_sum: float = 0.0
    click_n: int = 0
    length: float = field(default=0.0, compare=False)
    """Seconds after ``started`` when its point is due."""


@dataclass
class ModelSeries:
    """A model's open window in this worker (the feature's state); a point is due once the window
    is the interval old."""

    window: Window | None = None
    seen: bool = False
    """Whether the model had a window in this worker (its first one was short)."""
    active: bool = False
    """Whether the model applied a batch since the last :meth:`idle`."""
    slots_at: str | None = None
    """``estimated_at`` of the last per-slot estimate a point recorded."""

    def add(self, interval: float, events: int, click_sum: float, click_n: int,
            now: float, max_events: int = 0) -> Window | None:
        """Count one published batch; the closed window when a point is due (a new one
        opens): once the window is ``interval`` seconds old, or holds ``max_events`` events
        (0: by time only), so a burst draws its curve, a point per batch at most."""
        window = self.window
        if window is None:
            first = not self.seen
            self.seen = True
            window = self.window = Window(
                now, length=min(FIRST_POINT_SECONDS, interval) if first else interval)
        window.events += events
        window.click_sum += click_sum
        window.click_n += click_n
        self.active = True
        full = 0 < max_events <= window.events
        if now - window.started < window.length and not full:
            return None
        self.window = Window(now, length=interval)
        return window

    def idle(self, now: float) -> Window | None:
        """Close the window if it is due and the model applied nothing since the last call:
        returned when it has events (its point is due), dropped when empty (the model's next
        batch opens a new one)."""
        active, self.active = self.active, False
        window = self.window
        if active or window is None or now - window.started < window.length:
            return None
        self.window = None
        return window if window.events else None


async def after_publish(ctx: WorkerContext, slot: ModelSlot, published: Published) -> None:
    """The hook after a publish: :func:`record` the published batch."""
    await record(ctx, slot, published.view, batch_size(published.applied),
                 published.version, float(np.sum(published.clicks)), len(published.clicks),
                 published.rates)


async def after_pass(ctx: WorkerContext) -> None:
    """The hook after a pass: :func:`record_idle`."""
    await record_idle(ctx)


async def record(ctx: WorkerContext, slot: ModelSlot, view: TrainerView, events: int,
                 version: int, click_sum: float, click_n: int,
                 rates: tuple[float, float]) -> None:
    """Add a published batch to the model's window; write a point when one is due.

    ``view`` is what the trainer read of the model before the batch (its
    counters and noise record), ``rates`` the noise rates the batch was
    learned with.
    """
    if ctx.series_interval <= 0:
        return
    now = time.monotonic()
    window = FEATURE.state(slot).add(ctx.series_interval, events, click_sum, click_n, now,
                             ctx.series_events)
    if window is None:
        return
    info = view.info
    total = SnapshotInfo(version, info.last_id, info.events_applied + events,
                         info.events_expired, info.click_sum + click_sum,
                         info.click_n + click_n, info.updated_at)
    await _write(ctx, slot, window, now, total, rates, view)


async def record_idle(ctx: WorkerContext) -> None:
    """Write the points of the models whose window is due and that applied nothing since the
    last call (the trainer calls it after each pass), from their counters as published."""
    now = time.monotonic()
    for slot, window in [(s, w) for s in list(ctx.slots.values())
                         if (w := FEATURE.state(s).idle(now)) is not None]:
        view = await ctx.delivery.read_model(ModelKeys(*slot.ref))
        if view is None:
            continue  # deleted meanwhile
        rates = (view.noise.rho0, view.noise.rho1) if view.noise else (0.0, 0.0)
        await _write(ctx, slot, window, now, view.info, rates, view)


async def _write(ctx: WorkerContext, slot: ModelSlot, window: Window, now: float,
                 total: SnapshotInfo, rates: tuple[float, float], view: TrainerView) -> None:
    """Append the point of a closed window and set the quality gauges."""
    ref, noise = slot.ref, view.noise
    mk = ModelKeys(*ref)
    extra = await ctx.store.series.context(mk)
    point = make_point(window, now, total, rates, noise.source if noise is not None else None,
                       extra, None if noise is None else noise.unreliable_reason(True))
    point.update(rank_fields(view.config, noise, extra.anchor, FEATURE.state(slot)))
    await ctx.store.series.append(mk, point)
    if point["online_reward"] is not None:
        ctx.metrics.online_reward.labels(*ref).set(point["online_reward"])
        ctx.metrics.calibrated_reward.labels(*ref).set(point["calibrated_reward"])


def make_point(window: Window, now: float, total: SnapshotInfo, rates: tuple[float, float],
               noise_source: str | None, extra: SeriesContext,
               unreliable: str | None = None) -> dict[str, Any]:
    """The JSON point of a closed window (see the module docstring for the fields);
    ``unreliable``: why its rewards' rates cannot be stood behind (None: they can).

    >>> p = make_point(Window(0.0, 10, 4.0, 10), 5.0,
    ...                SnapshotInfo(3, "1-0", 30, 0, 9.0, 30, None), (0.1, 0.2), "estimated",
    ...                SeriesContext(2, 0, {"status": "published",
    ...                                     "interval": {"rho0": [0.05, 0.15], "rho1": None}}))
    >>> p["events_per_second"], p["online_reward"], p["calibrated_reward"], p["rho0_interval"]
    (2.0, 0.4, 0.428571, [0.05, 0.15])
    """
    online = window.click_sum / window.click_n if window.click_n else None
    rho0, rho1 = rates
    point: dict[str, Any] = {
        "t": round(time.time(), 3),
        "version": total.version,
        "events_applied": total.events_applied,
        "events": window.events,
        "events_per_second": round(window.events / max(now - window.started, 1e-9), 3),
        "online_reward": _rounded(online),
        "calibrated_reward": _rounded(None if online is None
                                      else calibrated_probability(online, rho0, rho1)),
        "debiased_reward": _rounded(total.debiased_reward(rho0, rho1)),
        "rho0": _rounded(rho0) if noise_source is not None else None,
        "rho1": _rounded(rho1) if noise_source is not None else None,
        "noise_source": noise_source,
        "rho0_interval": None,
        "rho1_interval": None,
        "calibration_unreliable": unreliable is not None,
        "reason": unreliable,
        "pending": extra.pending,
        "backlog": extra.backlog,
    }
    anchor = extra.anchor or {}
    if noise_source == "estimated" and anchor.get("status") == "published":
        interval = anchor.get("interval") or {}
        for kind in ("rho0", "rho1"):
            bounds = interval.get(kind)
            point[f"{kind}_interval"] = ([_rounded(float(b)) for b in bounds]
                                         if bounds else None)
    return point


def rank_fields(config: ModelConfig, noise: NoiseRecord | None,
                last: dict[str, Any] | None, series: ModelSeries) -> dict[str, Any]:
    """The point's position bias and per-slot estimate fields of a model whose learner
    declares ``estimates_position_bias`` / ``logs_placements`` (module docstring); nothing
    for the others.  ``last`` is the last estimate's outcome; ``series`` remembers which
    per-slot estimate was recorded last.

    >>> config = ModelConfig.of_learner("rank", "ridge_pl", {"slots": 2, "position_bias": None})
    >>> fields = rank_fields(config, None, None, ModelSeries())
    >>> fields["position_bias"], fields["position_bias_source"], fields["slots"]
    ([1.0, 1.0], 'insufficient_data', None)
    """
    cls = config.learner_class
    if not cls.estimates_position_bias:
        return {}
    in_force = None if noise is None else noise.slots
    values, source = position_bias(cls, config.params, in_force)
    out: dict[str, Any] = {"position_bias": [round(v, DIGITS) for v in values],
                           "position_bias_source": source}
    if not cls.logs_placements:
        return out
    status = "insufficient_data" if noise is None else noise.status
    stamp = None if noise is None else noise.estimated_at
    new = bool(in_force) and stamp != series.slots_at
    if new:
        series.slots_at = stamp
    last = last or {}
    if noise is not None and status == "fixed":
        reason = noise.fixed_reason
    else:
        reason = "" if last.get("status") == "published" else str(
            last.get("reason", TOO_FEW_EVENTS))
    out.update(slots=in_force if new else None, slots_status=status, slots_reason=reason)
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


FEATURE = Feature("series", state_factory=ModelSeries, after_publish=after_publish,
                  after_pass=after_pass)
