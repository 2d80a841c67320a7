"""Challengers of a model: configurations that learn from its events without serving.

Per model (keys of :mod:`app.store.keys`, one hash tag): a hash of
definitions (name -> JSON ``name``, ``algorithm``, ``params``, ``uid``,
``created_at``), a hash of learner states (codec) and a hash of estimator
stats (name -> JSON ``sums``, ``events``, ``last_id``, ``status``,
``error``; ``_champion`` -> the champion's sums).  Every write is one Lua
step: add (name free, under the cap), remove, the trainer's save (only for
the challengers it read, unchanged since) and promote (the challenger's
config and state become the model's, the old champion optionally a
challenger, a ``promote`` marker goes to the decision log and the replaced
and the new state are kept as versions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import redis.asyncio as aioredis

from app.learners.config import ModelConfig
from app.store import codec
from app.store.client import lua_source
from app.store.keys import ModelKeys
from app.store.results import ScriptResult
from app.store.util import text, utc_now
from app.store.versions import VersionPolicy

#: Most challengers a model may have (each learns every batch in the trainer).
MAX_CHALLENGERS = 3
#: Stats field of the champion's on-policy sums (challenger names never start with "_").
CHAMPION_FIELD = "_champion"


@dataclass(frozen=True)
class StoredChallenger:
    """One challenger as stored: its definition and stats, parsed and raw (the raw bytes
    are what a guarded write compares)."""

    definition: dict[str, Any]
    raw_definition: bytes
    stats: dict[str, Any] | None
    raw_stats: bytes | None

    @property
    def name(self) -> str:
        return str(self.definition["name"])


@dataclass(frozen=True)
class ChallengerSave:
    """What the trainer saves of one challenger after a batch."""

    challenger: StoredChallenger
    """The challenger as the trainer read it (the save is skipped if it changed)."""
    stats: dict[str, Any]
    state: dict[str, np.ndarray] | None
    """None: keep the stored state (a failed challenger)."""


class AddRefused(Exception):
    """A challenger was not added: ``reason`` is ``exists``, ``full`` or ``gone``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PromoteRefused(Exception):
    """A promotion did not happen: ``reason`` is ``config_changed``, ``challenger_changed``,
    ``gone``, ``name_taken``, ``behind`` (the challenger has not saved the model's last
    published batch yet) or ``failed`` (its learner failed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_PROMOTE_REASONS = {ScriptResult.MOVED: "config_changed",
                    ScriptResult.CHALLENGER_CHANGED: "challenger_changed",
                    ScriptResult.GONE: "gone", ScriptResult.NAME_TAKEN: "name_taken",
                    ScriptResult.BEHIND: "behind", ScriptResult.FAILED: "failed"}
_ADD_REASONS = {ScriptResult.NAME_TAKEN: "exists", ScriptResult.FULL: "full"}


class ChallengerStore:
    """Definitions, states and estimator stats of each model's challengers."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._add = redis.register_script(lua_source("challenger_add"))
        self._remove = redis.register_script(lua_source("challenger_remove"))
        self._save = redis.register_script(lua_source("challenger_save"))
        self._promote = redis.register_script(lua_source("challenger_promote"))

    async def add(self, mk: ModelKeys, definition: dict[str, Any],
                  state: dict[str, np.ndarray], most: int) -> None:
        """Store a new challenger (``definition["name"]``) with its initial state; raises
        :class:`AddRefused` when the name is taken, ``most`` exist or the model is gone."""
        reply = int(await self._add(
            keys=[mk.meta, mk.challengers, mk.challenger_states],
            args=[definition["name"], orjson.dumps(definition), codec.encode(state), most]))
        if reply < 0:
            raise AddRefused(_ADD_REASONS.get(ScriptResult(reply), "gone"))

    async def remove(self, mk: ModelKeys, name: str) -> bool:
        """Remove a challenger; False when there is none of that name."""
        return bool(await self._remove(
            keys=[mk.challengers, mk.challenger_states, mk.challenger_stats], args=[name]))

    async def definitions(self, mk: ModelKeys) -> dict[str, bytes]:
        """Raw definition JSON of each challenger, by name (one round trip)."""
        raw: Any = await self.redis.hgetall(mk.challengers)
        return {text(k) or "": bytes(v) for k, v in raw.items()}

    async def read(self, mk: ModelKeys) -> tuple[list[StoredChallenger], dict[str, Any] | None]:
        """Every challenger (sorted by name) and the champion's stats, in one round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(mk.challengers)
            pipe.hgetall(mk.challenger_stats)
            definitions, stats = await pipe.execute()
        stats = {text(k) or "": bytes(v) for k, v in stats.items()}
        out = [_parse(bytes(raw), stats.get(text(name) or ""))
               for name, raw in sorted(definitions.items())]
        champion = stats.get(CHAMPION_FIELD)
        return out, (orjson.loads(champion) if champion else None)

    async def load(self, mk: ModelKeys, raw_definition: bytes
                   ) -> tuple[StoredChallenger, dict[str, np.ndarray] | None]:
        """A challenger's stats and state as stored now (state None when it is gone)."""
        name = orjson.loads(raw_definition)["name"]
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(mk.challenger_stats, name)
            pipe.hget(mk.challenger_states, name)
            raw_stats, raw_state = await pipe.execute()
        challenger = _parse(raw_definition, raw_stats)
        return challenger, (codec.decode(raw_state) if raw_state is not None else None)

    async def champion_stats(self, mk: ModelKeys) -> bytes | None:
        """The champion's raw stats."""
        raw: Any = await self.redis.hget(mk.challenger_stats, CHAMPION_FIELD)
        return bytes(raw) if raw is not None else None

    async def save(self, mk: ModelKeys, champion: tuple[bytes | None, dict[str, Any]],
                   saves: list[ChallengerSave]) -> tuple[bytes | None, list[bytes | None]]:
        """Save the champion's stats (``(as read, new)``) and each challenger's, each only
        if unchanged since read (one Lua step).  Returns the raw stats now stored of the
        champion and of each challenger, None where the save was skipped."""
        champion_raw = orjson.dumps(champion[1])
        args: list[bytes | str] = [champion[0] or b"", champion_raw]
        raws = []
        for save in saves:
            raw = orjson.dumps(save.stats)
            raws.append(raw)
            args += [save.challenger.name, save.challenger.raw_definition,
                     save.challenger.raw_stats or b"", raw,
                     b"" if save.state is None else codec.encode(save.state)]
        flags: Any = await self._save(
            keys=[mk.challengers, mk.challenger_states, mk.challenger_stats], args=args)
        return ((champion_raw if int(flags[0]) else None),
                [raw if int(flag) else None for raw, flag in zip(raws, flags[1:], strict=True)])

    async def promote(self, mk: ModelKeys, challenger: StoredChallenger, raw_config: bytes,
                      config: ModelConfig, previous: dict[str, Any] | None,
                      caught_up: bool = False) -> int:
        """Make ``challenger`` the champion in one step (see the module docstring); the old
        champion becomes the challenger ``previous`` (None: dropped).  ``raw_config``: the
        model config as read; ``caught_up``: only once the challenger saved the model's last
        published batch.  The decision log's ``promote`` marker (``version``, ``challenger``,
        ``algorithm``, ``params``, ``previous``: the old algorithm and params, ``previous_as``)
        is added and the replaced and the new state are kept as versions (``before promote``,
        ``promote``; :mod:`app.store.versions`) in the same step.  Returns the new snapshot
        version; raises
        :class:`PromoteRefused`."""
        old = ModelConfig.from_json(raw_config)
        marker = {"challenger": challenger.name, "algorithm": config.algorithm,
                  "params": config.params,
                  "previous": {"algorithm": old.algorithm, "params": old.params},
                  "previous_as": None if previous is None else previous["name"]}
        reply = int(await self._promote(
            keys=[mk.meta, mk.snapshot, mk.challengers, mk.challenger_states,
                  mk.challenger_stats, mk.log, mk.versions, mk.version_states],
            args=[challenger.name, challenger.raw_definition, raw_config, config.to_json(),
                  "" if previous is None else previous["name"],
                  b"" if previous is None else orjson.dumps(previous), utc_now(),
                  "1" if caught_up else "0", orjson.dumps(marker),
                  VersionPolicy.of(config).kept]))
        if reply < 0:
            raise PromoteRefused(_PROMOTE_REASONS.get(ScriptResult(reply), "gone"))
        return reply


def challenger_config(config: ModelConfig, definition: dict[str, Any]) -> ModelConfig:
    """The model ``config`` with a challenger's algorithm and params: its learner's config,
    and the model's config once it is promoted."""
    return config.updated(algorithm=definition["algorithm"], params=definition["params"])


def _parse(raw_definition: bytes, raw_stats: bytes | None) -> StoredChallenger:
    return StoredChallenger(orjson.loads(raw_definition), raw_definition,
                            orjson.loads(raw_stats) if raw_stats else None,
                            bytes(raw_stats) if raw_stats else None)
