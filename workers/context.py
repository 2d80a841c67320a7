"""What the role handlers share: settings, store, metrics, leases, caches.

Built once when a :class:`workers.worker.Worker` starts (arq's "context"):
the handlers in :mod:`workers.trainer`, :mod:`workers.jobs` and
:mod:`workers.sweeper` are plain ``async`` functions of it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, KeysView
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.learners.base import Learner
from app.learners.config import ModelConfig
from app.metrics import Metrics
from app.store import Store
from app.store.delivery import DeliveryStore
from app.store.leases import HeartbeatStore, LeaseStore
from app.store.nrest import AnchorStore, SampleStore
from app.worker_settings import WorkerSettings
from workers import ModelRef
from workers.pacing import Pacer

T = TypeVar("T")


@dataclass
class CachedLearner:
    """A model's learner as of snapshot ``version`` (``uid`` tells re-created ids apart)."""

    uid: str
    version: int
    config: ModelConfig
    learner: Learner


@dataclass
class ModelSlot:
    """What this worker keeps of one model while it holds the model's trainer lease: dropped
    as a whole when the lease goes (:meth:`WorkerContext.forget`)."""

    ref: ModelRef
    learner: CachedLearner | None = None
    """The model's learner as of its last snapshot read or published here."""
    read_size: int | None = None
    """Entries the trainer asks for in its next read (None: the batch size; see
    :mod:`workers.trainer`)."""
    states: dict[str, Any] = field(default_factory=dict)
    """Each trainer feature's state of the model, by the feature's name: created and read
    by the feature (:meth:`workers.feature.Feature.state`), opaque here."""


@dataclass
class WorkerContext:
    """Resources opened at start-up and handed to every handler."""

    config: WorkerSettings
    store: Store
    metrics: Metrics
    executor: Executor
    """Pool that runs NREst fits off the event loop."""
    stopping: asyncio.Event
    """Set on shutdown: handlers finish the model at hand and return."""
    leases: LeaseStore = field(init=False)
    heartbeats: HeartbeatStore = field(init=False)
    delivery: DeliveryStore = field(init=False)
    samples: SampleStore = field(init=False)
    anchors: AnchorStore = field(init=False)
    series_interval: float = field(init=False)
    """Seconds between two points of a model's quality series (the setting's; 0: none)."""
    series_events: int = field(init=False)
    """Most events between two points of a model's quality series (the setting's; 0: by
    time only)."""
    slots: dict[ModelRef, ModelSlot] = field(default_factory=dict)
    """Each model whose trainer lease this worker holds, and what it keeps of it."""
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    """Shielded publish-then-ack steps still running (awaited at shutdown)."""
    nrest_last_run: dict[ModelRef, float] = field(default_factory=dict)
    """When each model's noise rates were last estimated (any model, held or not)."""
    balanced_at: float = -math.inf
    """``time.monotonic()`` of the last lease balancing (see :mod:`workers.trainer`)."""
    renewed_at: float = -math.inf
    """``time.monotonic()`` of the last renewal of every owned lease."""
    swept_all_at: float = -math.inf
    """``time.monotonic()`` of the sweeper's last look at every model (see
    :mod:`workers.sweeper`)."""
    noise_seeded_at: float = -math.inf
    """``time.monotonic()`` of the jobs role's last look at every model (see
    :mod:`workers.nrest`)."""
    requeued_at: float = -math.inf
    """``time.monotonic()`` of the sweeper's last look for jobs stored but not queued."""
    pacer: Pacer = field(init=False)
    """When each owned model is next read (see :mod:`workers.pacing`)."""
    paced: bool = True
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the wake-up listener when it wakes a model (ends the trainer's sleep between
    passes, see :func:`workers.trainer.pause`)."""
    listening: bool = False
    """Whether the worker listens for wake-ups of sleeping models (:mod:`workers.wake`):
    only then does the trainer let idle models sleep."""
    """Whether the trainer skips models that are not due (the tests' drain reads every
    model on every pass)."""

    def __post_init__(self) -> None:
        redis = self.store.redis
        self.leases = LeaseStore(redis)
        self.heartbeats = HeartbeatStore(redis)
        self.delivery = DeliveryStore(redis)
        self.samples = SampleStore(redis)
        self.anchors = AnchorStore(redis)
        self.series_interval = self.config.series_interval
        self.series_events = self.config.series_events
        self.pacer = Pacer(self.config.flush_interval, self.config.idle_interval,
                           self.config.retry_delay)

    async def in_pool(self, fit: Callable[[], T]) -> T:
        """``fit()`` in the worker's process pool (NREst fits, anchor estimates, policy
        evaluations), at most ``nrest_timeout`` seconds (TimeoutError)."""
        return await asyncio.wait_for(
            asyncio.get_running_loop().run_in_executor(self.executor, fit),
            self.config.nrest_timeout)

    @property
    def held(self) -> KeysView[ModelRef]:
        """Models whose trainer lease this worker holds."""
        return self.slots.keys()

    def hold(self, ref: ModelRef) -> None:
        """Treat ``ref`` as owned (its lease was just taken), with an empty slot."""
        self.slots[ref] = ModelSlot(ref)

    def forget(self, ref: ModelRef) -> None:
        """Stop treating ``ref`` as owned: drop its slot (and its pacing)."""
        self.slots.pop(ref, None)
        self.pacer.forget(ref)
