"""Storage layer of noisyloop (redis-py only; knows nothing of HTTP).

:class:`Store` bundles one Redis client, the Lua scripts and the stores of
each concern: ``tenants`` (tenants and API keys), ``models`` (configs and
the per-request model view), ``snapshots`` (learned arrays + version + last
applied stream id), ``events`` (decision contexts, the exactly-once feedback
join, the per-model stream), ``dead_letters`` (events the trainer could not
apply), ``log`` (the decision log of applied events), ``evaluations``
(off-policy evaluation jobs on that log), ``noise`` (click-noise rates),
``challengers`` (configurations following a model's events without serving:
definitions, states, estimator sums, promotion), ``anchors`` (the rows
of the anchor noise estimator), ``open`` (feedback in parts, label budgets, examples without a
decision), ``rate`` (per-tenant rate limits), ``versions`` (kept snapshots
and rollback), ``series`` (per-model quality time series), ``aliases`` (decisions known by a
client's own event id), ``feature_names``, ``importances`` and ``named_evaluations`` (the
names of hashed features, the feature-importance and named evaluation reports), ``sweep``
and ``noise_due`` (the models the sweeper and the periodic noise estimates must look at).
Key names live in :mod:`app.store.keys` only.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from app.store import keys
from app.store.aliases import AliasStore
from app.store.challengers import ChallengerStore
from app.store.client import STORE_ERRORS, Scripts, connect
from app.store.deadletters import DeadLetterStore
from app.store.decisionlog import DecisionLogStore
from app.store.drift import DriftStore
from app.store.dueset import DueSet
from app.store.evaluations import EvaluationStore
from app.store.events import EventStore
from app.store.failures import FailureStore
from app.store.featurenames import FeatureNameStore
from app.store.keys import ModelKeys
from app.store.models import ModelStore
from app.store.noise import NoiseStore
from app.store.nrest import AnchorStore
from app.store.openfeedback import OpenFeedbackStore
from app.store.ratelimit import RateLimitStore
from app.store.reports import ReportStore
from app.store.series import SeriesStore
from app.store.snapshots import SnapshotStore
from app.store.tenants import TenantStore
from app.store.versions import VersionStore

__all__ = ["STORE_ERRORS", "ModelKeys", "Store"]


class Store:
    """Every store of one Redis connection pool."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        #: One Redis (not a Cluster): a Lua step may then read keys of several hash tags,
        #: as the guarded decision log does (:class:`~app.store.events.DecisionGuard`).
        self.single_redis = not isinstance(redis, RedisCluster)
        self.scripts = Scripts(redis)
        self.tenants = TenantStore(redis)
        self.models = ModelStore(redis, self.scripts)
        self.snapshots = SnapshotStore(redis, self.scripts)
        self.events = EventStore(redis, self.scripts, batch_decisions=self.single_redis)
        self.dead_letters = DeadLetterStore(redis)
        self.failures = FailureStore(redis)
        self.log = DecisionLogStore(redis)
        self.evaluations = EvaluationStore(redis)
        self.noise = NoiseStore(redis)
        self.challengers = ChallengerStore(redis)
        self.anchors = AnchorStore(redis)
        self.open = OpenFeedbackStore(redis)
        self.rate = RateLimitStore(redis)
        self.versions = VersionStore(redis)
        self.series = SeriesStore(redis, self.scripts)
        self.drift = DriftStore(redis)
        self.sweep = DueSet(redis, keys.SWEEP_DUE)
        self.noise_due = DueSet(redis, keys.NOISE_DUE)
        self.aliases = AliasStore(redis)
        self.feature_names = FeatureNameStore(redis)
        self.importances = ReportStore(redis, lambda mk: mk.feature_importances)
        self.named_evaluations = ReportStore(redis, lambda mk: mk.named_evaluations)

    @classmethod
    def from_url(cls, url: str, *, socket_timeout: float = 2.0,
                 connect_timeout: float = 1.0) -> Store:
        """A store on a new client with bounded timeouts."""
        return cls(connect(url, socket_timeout=socket_timeout, connect_timeout=connect_timeout))

    async def ping(self) -> bool:
        """True when Redis answers."""
        return bool(await self.redis.ping())

    async def close(self) -> None:
        """Close the connection pool."""
        await self.redis.aclose()
