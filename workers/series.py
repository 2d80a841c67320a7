"""The trainer's per-model quality series: one point per model every ``series_interval`` seconds.

After each published batch the trainer adds the batch's counters to the
model's open window (:class:`ModelSeries`, in the model's slot: a few additions: the series
must cost next to nothing beside learning).  Once the window is
``series_interval`` seconds old, :func:`record` closes it into a point,
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
* ``pending`` (decisions awaiting feedback) and ``backlog`` (entries not yet
  applied);
* for a learner that declares ``estimates_position_bias`` (rank models):
  ``position_bias``, its ``theta`` per slot relative to slot 0, and
  ``position_bias_source`` (configured, estimated or insufficient_data).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from app.learners.base import Learner, batch_size
from app.learners.build import build_learner
from app.learners.proxy import calibrated_probability
from app.store.delivery import TrainerView
from app.store.keys import ModelKeys
from app.store.series import SeriesContext
from app.store.snapshots import SnapshotInfo

if TYPE_CHECKING:  # workers.context holds a ModelSeries
    from workers.context import ModelRef, ModelSlot, WorkerContext
    from workers.hooks import Published

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
    """A model's open window in this worker (in its slot); a point is due once the window
    is the interval old."""

    window: Window | None = None
    seen: bool = False
    """Whether the model had a window in this worker (its first one was short)."""
    active: bool = False
    """Whether the model applied a batch since the last :meth:`idle`."""

    def add(self, interval: float, events: int, click_sum: float, click_n: int,
            now: float) -> Window | None:
        """Count one published batch; the closed window when a point is due (a new one
        opens)."""
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
        if now - window.started < window.length:
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
    """The trainer hook (:mod:`workers.hooks`): :func:`record` the published batch."""
    await record(ctx, slot, published.view, batch_size(published.applied),
                 published.version, float(np.sum(published.clicks)), len(published.clicks),
                 published.rates, published.learner)


async def after_pass(ctx: WorkerContext) -> None:
    """The trainer hook after a pass (:mod:`workers.hooks`): :func:`record_idle`."""
    await record_idle(ctx)


async def record(ctx: WorkerContext, slot: ModelSlot, view: TrainerView, events: int,
                 version: int, click_sum: float, click_n: int,
                 rates: tuple[float, float], learner: Learner) -> None:
    """Add a published batch to the model's window; write a point when one is due.

    ``view`` is what the trainer read of the model before the batch (its
    counters and noise record), ``rates`` the noise rates the batch was
    learned with, ``learner`` the model as published.
    """
    if ctx.series_interval <= 0:
        return
    now = time.monotonic()
    window = slot.series.add(ctx.series_interval, events, click_sum, click_n, now)
    if window is None:
        return
    info = view.info
    total = SnapshotInfo(version, info.last_id, info.events_applied + events,
                         info.events_expired, info.click_sum + click_sum,
                         info.click_n + click_n, info.updated_at)
    await _write(ctx, slot.ref, window, now, total, rates,
                 view.noise.source if view.noise is not None else None, learner)


async def record_idle(ctx: WorkerContext) -> None:
    """Write the points of the models whose window is due and that applied nothing since the
    last call (the trainer calls it after each pass), from their counters as published."""
    now = time.monotonic()
    for slot, window in [(s, w) for s in list(ctx.slots.values())
                         if (w := s.series.idle(now)) is not None]:
        ref = slot.ref
        view = await ctx.delivery.read_model(ModelKeys(*ref))
        learner = None if view is None else await _published_learner(ctx, slot, view)
        if view is None or learner is None:
            continue  # deleted meanwhile
        rates = (view.noise.rho0, view.noise.rho1) if view.noise else (0.0, 0.0)
        await _write(ctx, ref, window, now, view.info, rates,
                     view.noise.source if view.noise is not None else None, learner)


async def _published_learner(ctx: WorkerContext, slot: ModelSlot,
                             view: TrainerView) -> Learner | None:
    """The learner at the view's version: the trainer's cached one, else the snapshot's."""
    cached = slot.learner
    if cached is not None and cached.version == view.info.version:
        return cached.learner
    snap = await ctx.store.snapshots.load(ModelKeys(*slot.ref))
    return None if snap is None else build_learner(view.config, snap.state)


async def _write(ctx: WorkerContext, ref: ModelRef, window: Window, now: float,
                 total: SnapshotInfo, rates: tuple[float, float], noise_source: str | None,
                 learner: Learner) -> None:
    """Append the point of a closed window and set the quality gauges."""
    mk = ModelKeys(*ref)
    extra = await ctx.store.series.context(mk)
    point = make_point(window, now, total, rates, noise_source, extra)
    point.update(position_bias(learner))
    await ctx.store.series.append(mk, point)
    if point["online_reward"] is not None:
        ctx.metrics.online_reward.labels(*ref).set(point["online_reward"])
        ctx.metrics.calibrated_reward.labels(*ref).set(point["calibrated_reward"])


def make_point(window: Window, now: float, total: SnapshotInfo, rates: tuple[float, float],
               noise_source: str | None, extra: SeriesContext) -> dict[str, Any]:
    """The JSON point of a closed window (see the module docstring for the fields).

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


def position_bias(learner: Learner) -> dict[str, Any]:
    """The point's ``position_bias`` and ``position_bias_source`` of a learner that declares
    ``estimates_position_bias``; nothing for the others.

    >>> from app.learners.rank import RidgeRanker
    >>> position_bias(RidgeRanker(n_features=2, n_action_features=1, slots=3,
    ...                           position_bias=[1.0, 0.5, 0.25]))
    {'position_bias': [1.0, 0.5, 0.25], 'position_bias_source': 'configured'}
    """
    if not learner.estimates_position_bias:
        return {}
    theta, source = learner.position_bias_estimate()
    return {"position_bias": [round(float(v), DIGITS) for v in theta],
            "position_bias_source": source}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)
