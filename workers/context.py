"""What the role handlers share: settings, store, metrics, leases, caches.

Built once when a :class:`workers.worker.Worker` starts (arq's "context"):
the handlers in :mod:`workers.trainer`, :mod:`workers.nrest` and
:mod:`workers.sweeper` are plain ``async`` functions of it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from app.learners.base import Learner
from app.learners.noise_anchor import ProgressiveScorer
from app.metrics import Metrics
from app.store import Store
from app.store.delivery import DeliveryStore
from app.store.leases import HeartbeatStore, LeaseStore
from app.store.nrest import AnchorStore, SampleStore
from workers.pacing import Pacer
from workers.series import SeriesRecorder
from workers.settings import WorkerSettings
from workers.versions import VersionKeeper

T = TypeVar("T")

if TYPE_CHECKING:
    from workers.challengers import ModelChallengers
    from workers.drift import DriftWatch

ModelRef = tuple[str, str]
"""``(tenant, model)``."""


@dataclass
class CachedLearner:
    """A model's learner as of snapshot ``version`` (``uid`` tells re-created ids apart)."""

    uid: str
    version: int
    config: dict[str, Any]
    learner: Learner


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
    series: SeriesRecorder = field(init=False)
    """Each model's open window of its quality series (see :mod:`workers.series`)."""
    versions: VersionKeeper = field(default_factory=VersionKeeper)
    """When each model's version is next kept (see :mod:`workers.versions`)."""
    held: set[ModelRef] = field(default_factory=set)
    """Models whose trainer lease this worker holds."""
    learners: dict[ModelRef, CachedLearner] = field(default_factory=dict)
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    """Shielded publish-then-ack steps still running (awaited at shutdown)."""
    nrest_last_run: dict[ModelRef, float] = field(default_factory=dict)
    scorers: dict[ModelRef, tuple[int, ProgressiveScorer]] = field(default_factory=dict)
    """Shadow scorer of each model's plays and the snapshot version it is in step with
    (see :mod:`workers.anchors`)."""
    read_sizes: dict[ModelRef, int] = field(default_factory=dict)
    """Entries the trainer asks for in its next read of a model (see :mod:`workers.trainer`)."""
    challengers: dict[ModelRef, ModelChallengers] = field(default_factory=dict)
    """Each model's challengers as this trainer follows them (see :mod:`workers.challengers`)."""
    drift: dict[ModelRef, DriftWatch] = field(default_factory=dict)
    """Each model's drift detector (see :mod:`workers.drift`)."""
    balanced_at: float = -math.inf
    """``time.monotonic()`` of the last lease balancing (see :mod:`workers.trainer`)."""
    renewed_at: float = -math.inf
    """``time.monotonic()`` of the last renewal of every owned lease."""
    pacer: Pacer = field(init=False)
    """When each owned model is next read (see :mod:`workers.pacing`)."""
    paced: bool = True
    """Whether the trainer skips models that are not due (the tests' drain reads every
    model on every pass)."""

    def __post_init__(self) -> None:
        redis = self.store.redis
        self.leases = LeaseStore(redis)
        self.heartbeats = HeartbeatStore(redis)
        self.delivery = DeliveryStore(redis)
        self.samples = SampleStore(redis)
        self.anchors = AnchorStore(redis)
        self.series = SeriesRecorder(self.config.series_interval)
        self.pacer = Pacer(self.config.flush_interval, self.config.idle_interval,
                           self.config.retry_delay)

    async def in_pool(self, fit: Callable[[], T]) -> T:
        """``fit()`` in the worker's process pool (NREst fits, anchor estimates, policy
        evaluations), at most ``nrest_timeout`` seconds (TimeoutError)."""
        return await asyncio.wait_for(
            asyncio.get_running_loop().run_in_executor(self.executor, fit),
            self.config.nrest_timeout)

    def forget(self, ref: ModelRef) -> None:
        """Stop treating ``ref`` as owned; drop its cached learner."""
        self.held.discard(ref)
        self.learners.pop(ref, None)
        self.read_sizes.pop(ref, None)
        self.challengers.pop(ref, None)
        self.scorers.pop(ref, None)
        self.drift.pop(ref, None)
        self.versions.forget(ref)
        self.series.forget(ref)
        self.pacer.forget(ref)
