"""The names of a model's hashed features, kept for the reports that name them.

Named features are hashed into a model's input (:func:`app.features.to_vector`), so a
learned weight belongs to a bucket, not to a name.  The routes that take named features
record, per model, each named feature's hashed key (``c:`` for a context feature, ``a:`` for
an action's) and the bucket it went to, in one hash (:attr:`~app.store.keys.ModelKeys.
feature_names`), up to :data:`MAX_FEATURE_NAMES` keys; a report (feature importances) then
names each bucket by the keys that hashed into it.  A process sends each key once
(:data:`MAX_REMEMBERED` per process, then it starts over).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio as aioredis

from app.store.client import lua_source, run_script
from app.store.keys import ModelKeys
from app.store.util import text

#: Most named keys a model's table holds (the later ones are not named in reports).
MAX_FEATURE_NAMES = 100_000
#: Keys a process remembers having sent, across models, before it forgets them all.
MAX_REMEMBERED = 1_000_000
#: The prefixes of a context feature's key and an action feature's.
CONTEXT, ACTION = "c", "a"


class FeatureNameStore:
    """Per-model table of named feature keys -> buckets (module docstring)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._script = redis.register_script(lua_source("feature_names"))
        self._sent: set[tuple[str, str]] = set()

    async def record(self, mk: ModelKeys, fields: Iterable[str],
                     bucket: Callable[[str], int]) -> None:
        """Add ``fields`` (``"c:<key>"`` / ``"a:<key>"``) with their ``bucket`` to the
        model's table, skipping those this process sent before."""
        tag = mk.feature_names
        new = [(field, bucket(field)) for field in dict.fromkeys(fields)
               if (tag, field) not in self._sent]
        if not new:
            return
        args: list[Any] = [MAX_FEATURE_NAMES]
        for field, index in new:
            args += [field, index]
        await run_script(self._script, [tag], args)
        if len(self._sent) + len(new) > MAX_REMEMBERED:
            self._sent.clear()
        self._sent.update((tag, field) for field, _ in new)

    async def names(self, mk: ModelKeys) -> dict[tuple[str, int], list[str]]:
        """The keys recorded per ``(kind, bucket)``, sorted."""
        raw: Any = await self._redis.hgetall(mk.feature_names)
        out: dict[tuple[str, int], list[str]] = {}
        for field, bucket in raw.items():
            kind, _, key = (text(field) or "").partition(":")
            out.setdefault((kind, int(bucket)), []).append(key)
        for keys in out.values():
            keys.sort()
        return out
