"""Model configs: create, read (alone or pipelined with the caller's API key), list, delete.

A model's config is a JSON document (model id, task, algorithm, sizes,
params with defaults, feedback policy, seed, a random ``uid`` that changes
when a model id is re-created) written once by :meth:`ModelStore.create`
together with the first snapshot, the noise record and the event stream
with its consumer group (one Lua step).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store import codec, keys
from app.store.client import Scripts, lua_source
from app.store.deadletters import DROPPED_FIELD, HELD_FIELD
from app.store.failures import FAILURE_FIELDS, TrainerFailure, parse_failure
from app.store.keys import TRAINER_GROUP, ModelKeys
from app.store.noise import NOISE_FIELDS, NoiseRecord, parse_noise
from app.store.results import ScriptResult
from app.store.snapshots import COUNTER_FIELDS, Snapshot, SnapshotInfo, parse_info
from app.store.tenants import KEY_RECORD_FIELDS, KeyRecord, parse_api_key, verify_key_record
from app.store.util import text, utc_now

#: The apprentice counters of a model's stats hash (written by the Lua steps that record
#: decisions and take feedback).
APPRENTICE_COUNTERS = ("apprentice_decisions", "apprentice_agreed", "apprentice_events",
                       "apprentice_reward_sum", "apprentice_agreed_events",
                       "apprentice_agreed_reward_sum")
#: Index members whose keys are unlinked per round trip when a model is removed.
_DELETE_CHUNK = 1000
#: Reads and compared writes :meth:`ModelStore.update_config` tries before giving up.
CONFIG_ATTEMPTS = 5


class ConfigBusy(Exception):
    """A model's config changed under every attempt to update it."""


@dataclass(frozen=True)
class ModelStamp:
    """What identifies the stored state a decision depends on, as a guarded Lua step compares
    it (see :class:`~app.store.events.DecisionGuard`): the SHA-1 of the config JSON (its
    ``uid`` changes when a model id is re-created), the snapshot version and the raw noise
    rates, source, estimator and withdrawal (``""`` when the model has no noise record; the last
    three decide whether the rates are reliable,
    :attr:`~app.store.noise.NoiseRecord.rates_reliable`)."""

    config_sha1: str
    version: int
    rho0: str
    rho1: str
    noise_source: str
    estimator: str
    withdrawn: str = ""


@dataclass(frozen=True)
class ModelView:
    """What the request path needs of a model: config, version, noise rates, and whether it
    has challengers (a rank decision then logs its candidates for them)."""

    tenant: str
    config: ModelConfig
    noise: NoiseRecord | None
    stamp: ModelStamp
    challenged: bool = False
    apprenticed: bool = False
    """Whether an apprentice decision was ever logged (the feedback of such a decision adds
    to the apprentice counters, also once the model serves online)."""

    @property
    def version(self) -> int:
        """The snapshot version."""
        return self.stamp.version

    @property
    def keys(self) -> ModelKeys:
        return ModelKeys(self.tenant, self.config.model_id)


@dataclass(frozen=True)
class ModelRecord:
    """A model with its stats, as the API returns it."""

    config: ModelConfig
    snapshot: SnapshotInfo
    predictions: int
    feedback_accepted: int
    noise: NoiseRecord | None
    dead_lettered: int
    """Dead letters held now (:mod:`app.store.deadletters`)."""
    dead_letters_dropped: int
    apprentice: dict[str, float] = field(default_factory=dict)
    """The :data:`APPRENTICE_COUNTERS` that were ever written."""
    awaiting_feedback: int = 0
    """Decisions logged whose feedback has not come (nor expired) yet, now."""
    backlog: int = 0
    """Accepted events not applied yet, now (what ``sync`` waits for): the events of the
    stream's entries newer than the snapshot's ``last_id`` (``unapplied_events.lua``)."""
    trainer_failure: TrainerFailure | None = None
    """Why the trainer's steps on the model fail (None: its last step succeeded)."""
    drift: dict[str, Any] | None = None
    """The drift detector's last report (:mod:`app.store.drift`; None before its first)."""


#: Stream entries :data:`unapplied_events.lua` reads to count a backlog's events (past
#: them it counts the rest at their mean size: exact while entries are of one size).
UNAPPLIED_SCAN = 32


class ModelStore:
    """Model configs and the per-request model view."""

    def __init__(self, redis: aioredis.Redis, scripts: Scripts) -> None:
        self.redis = redis
        self.scripts = scripts
        self._set_config = redis.register_script(lua_source("set_config"))

    async def create(self, tenant: str, config: ModelConfig, state: dict[str, np.ndarray],
                     rho0: float, rho1: float, rates_given: bool = False
                     ) -> ModelConfig | None:
        """Store a new model with its initial snapshot; None when the id is taken.

        ``created_at`` is added to ``config``; ``rates_given``: the
        request named the initial rates (:attr:`~app.store.noise.NoiseRecord.rates_given`).
        """
        mk = ModelKeys(tenant, config.model_id)
        created_at = utc_now()
        config = config.updated(created_at=created_at)
        created = await self.scripts.run(
            "create_model", [mk.meta, mk.snapshot, mk.events, mk.noise, mk.stats],
            [config.to_json(), created_at, codec.encode(state), TRAINER_GROUP,
             repr(float(rho0)), repr(float(rho1)), "1" if rates_given else "0"])
        if not created:
            return None
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(keys.tenant_models(tenant), mk.model)
            pipe.sadd(keys.ALL_MODELS, keys.model_ref(tenant, mk.model))
            await pipe.execute()
        return config

    async def config(self, tenant: str, model_id: str) -> ModelConfig | None:
        """The stored config, or None."""
        raw = await self.raw_config(ModelKeys(tenant, model_id))
        return ModelConfig.from_json(raw) if raw else None

    async def raw_config(self, mk: ModelKeys) -> bytes | None:
        """The config JSON as stored (what a compare-and-set of the config compares), or
        None."""
        raw: Any = await self.redis.hget(mk.meta, "config")
        return bytes(raw) if raw is not None else None

    async def snapshot_with_config(self, mk: ModelKeys) -> tuple[Snapshot, bytes] | None:
        """The full snapshot and the config JSON read with it in one round trip (a learner
        built from both matches even across a promotion, which changes both at once)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hmget(mk.snapshot, ["state", *COUNTER_FIELDS])
            pipe.hget(mk.meta, "config")
            values, config_raw = await pipe.execute()
        info = parse_info(values[1:])
        if info is None or values[0] is None or config_raw is None:
            return None
        return Snapshot(info, codec.decode(values[0])), bytes(config_raw)

    async def config_and_version(self, mk: ModelKeys) -> tuple[ModelConfig, int] | None:
        """The config and the snapshot version read together (one transaction: a promotion
        or rollback changes both at once); None when the model is gone."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(mk.meta, "config")
            pipe.hget(mk.snapshot, "version")
            raw, version = await pipe.execute()
        if raw is None or version is None:
            return None
        return ModelConfig.from_json(raw), int(version)

    async def update_config(self, tenant: str, model_id: str,
                            change: Callable[[ModelConfig], ModelConfig | None],
                            ) -> ModelConfig | None:
        """Store ``change(the config stored now)`` (None from ``change``: keep it), compared
        and set: when another write (a promotion, a rollback) lands between the read and the
        write, ``change`` is applied again to what it wrote, which is never undone.  Returns
        the config now stored, None when the model is gone; raises :class:`ConfigBusy` when
        the config kept changing."""
        mk = ModelKeys(tenant, model_id)
        for _ in range(CONFIG_ATTEMPTS):
            raw = await self.raw_config(mk)
            if raw is None:
                return None
            current = ModelConfig.from_json(raw)
            new = change(current)
            if new is None:
                return current
            reply = int(await self._set_config(keys=[mk.meta], args=[new.to_json(), raw]))
            if reply > 0:
                return new
            if reply == ScriptResult.GONE:
                return None
        raise ConfigBusy(model_id)

    async def view_with_key(self, token: str, model_id: str
                            ) -> tuple[KeyRecord | None, ModelView | None]:
        """Authenticate ``token`` and read the model in one pipelined round trip.

        Returns ``(key record or None, view or None)``; the view is only
        returned for a valid key of the model's own tenant.
        """
        parsed = parse_api_key(token)
        if parsed is None:
            return None, None
        mk = ModelKeys(parsed.tenant, model_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.api_key(parsed.key_id), list(KEY_RECORD_FIELDS))
            self._queue_view(pipe, mk)
            record, *view_values = await pipe.execute()
        key = verify_key_record(parsed, record)
        if key is None:
            return None, None
        return key, self._parse_view(parsed.tenant, view_values)

    async def view(self, tenant: str, model_id: str) -> ModelView | None:
        """The model view of an authenticated tenant (one round trip)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            self._queue_view(pipe, ModelKeys(tenant, model_id))
            values = await pipe.execute()
        return self._parse_view(tenant, values)

    @staticmethod
    def _queue_view(pipe: aioredis.client.Pipeline, mk: ModelKeys) -> None:
        pipe.hget(mk.meta, "config")
        pipe.hget(mk.snapshot, "version")
        pipe.hmget(mk.noise, list(NOISE_FIELDS))
        pipe.exists(mk.challengers)
        pipe.hexists(mk.stats, "apprentice_decisions")

    @staticmethod
    def _parse_view(tenant: str, values: list[Any]) -> ModelView | None:
        config_raw, version, noise, challenged, apprenticed = values
        if config_raw is None or version is None:
            return None
        raw = dict(zip(NOISE_FIELDS, noise, strict=True))
        stamp = ModelStamp(hashlib.sha1(config_raw).hexdigest(), int(version),
                           text(raw["rho0"]) or "", text(raw["rho1"]) or "",
                           text(raw["source"]) or "", text(raw["estimator"]) or "",
                           text(raw["withdrawn"]) or "")
        config = ModelConfig.from_json(config_raw)
        return ModelView(tenant, config, parse_noise(noise, config), stamp,
                         bool(challenged), bool(apprenticed))

    async def records(self, tenant: str, model_ids: list[str]) -> list[ModelRecord]:
        """Models with stats, the live counts read now (missing ids are skipped), in one
        round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for model_id in model_ids:
                mk = ModelKeys(tenant, model_id)
                pipe.hget(mk.meta, "config")
                pipe.hmget(mk.snapshot, list(COUNTER_FIELDS))
                pipe.hmget(mk.stats, ["predictions", "feedback_accepted", HELD_FIELD,
                                      DROPPED_FIELD, *FAILURE_FIELDS, *APPRENTICE_COUNTERS])
                pipe.hmget(mk.noise, list(NOISE_FIELDS))
                pipe.zcard(mk.pending)
                await self.scripts.run("unapplied_events", [mk.events, mk.snapshot],
                                       [UNAPPLIED_SCAN], client=pipe)
                pipe.hget(mk.drift, "report")
            values = await pipe.execute()
        out = []
        for i in range(len(model_ids)):
            config_raw, snap, stats, noise, waiting, backlog, drift = values[7 * i: 7 * i + 7]
            info = parse_info(snap)
            if config_raw is None or info is None:
                continue
            counters = stats[4 + len(FAILURE_FIELDS):]
            apprentice = {name: float(value) for name, value
                          in zip(APPRENTICE_COUNTERS, counters, strict=True) if value is not None}
            config = ModelConfig.from_json(config_raw)
            out.append(ModelRecord(config, info, int(stats[0] or 0),
                                   int(stats[1] or 0), parse_noise(noise, config),
                                   int(stats[2] or 0), int(stats[3] or 0), apprentice,
                                   int(waiting), int(backlog),
                                   parse_failure(stats[4:4 + len(FAILURE_FIELDS)]),
                                   orjson.loads(drift) if drift else None))
        return out

    async def record(self, tenant: str, model_id: str) -> ModelRecord | None:
        """One model with its stats."""
        found = await self.records(tenant, [model_id])
        return found[0] if found else None

    async def count(self, tenant: str) -> int:
        """Models ``tenant`` holds."""
        return int(await self.redis.scard(keys.tenant_models(tenant)))

    async def list_ids(self, tenant: str) -> list[str]:
        """Model ids of ``tenant``, sorted."""
        return sorted(text(m) or "" for m in await self.redis.smembers(keys.tenant_models(tenant)))

    async def all_models(self) -> list[tuple[str, str]]:
        """Every ``(tenant, model)`` of the service (for the background roles)."""
        refs: Any = await self.redis.smembers(keys.ALL_MODELS)
        return sorted(keys.split_model_ref(text(r) or "") for r in refs)

    async def delete(self, tenant: str, model_id: str) -> bool:
        """Remove the model (see :meth:`delete_many`); False when there is none."""
        return bool(await self.delete_many(tenant, [model_id]))

    async def delete_many(self, tenant: str, model_ids: Sequence[str]) -> list[str]:
        """Remove models of ``tenant``: every key with the model's hash tag (config,
        snapshot, stream, buffers, and the per-event and per-job keys: contexts, the
        tombstones of answered decisions until their expiry, partial feedback, jobs).
        Returns the ids that existed.

        The per-event and per-job keys are found on the model's own indexes
        (:attr:`~app.store.keys.ModelKeys.event_index`,
        :attr:`~app.store.keys.ModelKeys.job_index`), never by a scan: a delete costs what
        the model holds, whatever the store holds.
        """
        mks = [ModelKeys(tenant, m) for m in model_ids]
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in mks:
                pipe.exists(mk.meta)
            found = [mk for mk, n in zip(mks, await pipe.execute(), strict=True) if n]
        if not found:
            return []
        # unregister first, so that no background role picks the model up again
        async with self.redis.pipeline(transaction=False) as pipe:
            for mk in found:
                pipe.srem(keys.tenant_models(tenant), mk.model)
                pipe.srem(keys.ALL_MODELS, keys.model_ref(tenant, mk.model))
                pipe.zrem(keys.SWEEP_DUE, keys.model_ref(tenant, mk.model))
                pipe.zrem(keys.NOISE_DUE, keys.model_ref(tenant, mk.model))
                pipe.delete(mk.meta)
            await pipe.execute()
        for mk in found:
            await self._unlink_indexed(mk.event_index, mk.event_keys)
            await self._unlink_indexed(mk.job_index, lambda key: [key])
            await self.redis.unlink(*mk.fixed())
        return [mk.model for mk in found]

    async def _unlink_indexed(self, index: str, keys_of: Callable[[str], list[str]]) -> None:
        """UNLINK the keys of each member of the sorted set ``index`` (``keys_of`` a member)
        and the member, :data:`_DELETE_CHUNK` members per round trip, until none is left
        (members added meanwhile included)."""
        while True:
            members: Any = await self.redis.zrange(index, 0, _DELETE_CHUNK - 1)
            if not members:
                return
            async with self.redis.pipeline(transaction=False) as pipe:
                # one slot (the model's tag): the command as is, also in a Cluster pipeline
                pipe.execute_command("UNLINK", *(key for m in members
                                                 for key in keys_of(text(m) or "")))
                pipe.zrem(index, *members)
                await pipe.execute()
