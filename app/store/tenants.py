"""Tenants and their API keys.

An API key reads ``nl.<tenant>.<key_id>.<secret>``.  Redis keeps only the key
id, the tenant, a random salt and ``HMAC-SHA256(salt, secret)``; the secret
(256 random bits) is shown once and never stored.  Verification looks the key
id up directly (no scan) and compares hashes with :func:`hmac.compare_digest`.
The tenant in the key lets the API fetch the key record and the model of a
request in one pipelined round trip; the record's tenant must match it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

from app.store import keys
from app.store.util import text, utc_now

TENANT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
KEY_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{20,100}$")
KEY_PREFIX = "nl"


@dataclass(frozen=True)
class ParsedKey:
    """The parts of a presented API key."""

    tenant: str
    key_id: str
    secret: str


@dataclass(frozen=True)
class KeyRecord:
    """A verified API key's stored record: what the API caches to verify it again in-process."""

    key_id: str
    tenant: str
    salt: bytes
    hash: bytes

    def verifies(self, parsed: ParsedKey) -> bool:
        """Whether ``parsed`` is this key of this tenant with the right secret (the hash is
        computed and compared in constant time whatever the id and tenant)."""
        ok = hmac.compare_digest(hash_secret(self.salt, parsed.secret), self.hash)
        return ok and hmac.compare_digest(self.tenant, parsed.tenant) and \
            parsed.key_id == self.key_id


@dataclass(frozen=True)
class TenantInfo:
    """One tenant as the admin listing shows it."""

    tenant_id: str
    n_models: int
    created_at: str


def parse_api_key(token: str) -> ParsedKey | None:
    """Split ``nl.<tenant>.<key_id>.<secret>``; None when it cannot be a key."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != KEY_PREFIX:
        return None
    _, tenant, key_id, secret = parts
    if not (TENANT_ID_RE.match(tenant) and KEY_ID_RE.match(key_id) and _SECRET_RE.match(secret)):
        return None
    return ParsedKey(tenant, key_id, secret)


def hash_secret(salt: bytes, secret: str) -> bytes:
    """Keyed hash stored instead of the secret."""
    return hmac.new(salt, secret.encode("utf-8"), hashlib.sha256).digest()


def verify_key_record(parsed: ParsedKey, record: Sequence[Any]) -> KeyRecord | None:
    """Check a presented key against its ``[tenant, salt, hash]`` record, in constant time.

    Returns the record when the key is valid, else None.
    """
    tenant, salt, digest = record
    if tenant is None or salt is None or digest is None:
        # still spend the time of one hash, so a miss is not faster than a mismatch
        hmac.compare_digest(hash_secret(b"0" * 16, parsed.secret), b"\0" * 32)
        return None
    stored = KeyRecord(parsed.key_id, text(tenant) or "", bytes(salt), bytes(digest))
    return stored if stored.verifies(parsed) else None


#: Fields of a key record, in the order :func:`verify_key_record` expects.
KEY_RECORD_FIELDS = ("tenant", "salt", "hash")


class TenantStore:
    """Tenant registry and API keys."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def create(self, tenant: str) -> bool:
        """Register ``tenant``; False when it exists already."""
        meta = orjson.dumps({"created_at": utc_now()})
        return bool(await self.redis.hsetnx(keys.TENANT_INDEX, tenant, meta))

    async def exists(self, tenant: str) -> bool:
        """Whether ``tenant`` is registered."""
        return bool(await self.redis.hexists(keys.TENANT_INDEX, tenant))

    async def list_all(self) -> list[TenantInfo]:
        """Every tenant with its model count, sorted by id."""
        index = await self.redis.hgetall(keys.TENANT_INDEX)
        names = sorted(text(k) or "" for k in index)
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.scard(keys.tenant_models(name))
            counts = await pipe.execute()
        out = []
        for name, count in zip(names, counts, strict=True):
            meta = orjson.loads(index[name.encode()])
            out.append(TenantInfo(name, int(count), meta["created_at"]))
        return out

    async def remove(self, tenant: str) -> list[str]:
        """Revoke every key and unregister ``tenant``; return its model ids.

        The caller deletes the models (see :meth:`ModelStore.delete`).
        """
        key_ids = [text(k) or "" for k in await self.redis.smembers(keys.tenant_keys(tenant))]
        model_ids = [text(m) or "" for m in await self.redis.smembers(keys.tenant_models(tenant))]
        async with self.redis.pipeline(transaction=False) as pipe:
            for key_id in key_ids:
                pipe.delete(keys.api_key(key_id))
            pipe.delete(keys.tenant_keys(tenant))
            pipe.hdel(keys.TENANT_INDEX, tenant)
            await pipe.execute()
        return sorted(model_ids)

    async def create_key(self, tenant: str) -> tuple[str, str]:
        """Issue a new API key for ``tenant``; return ``(api_key, key_id)``."""
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.api_key(key_id), mapping={
                "tenant": tenant, "salt": salt, "hash": hash_secret(salt, secret),
                "created_at": utc_now()})
            pipe.sadd(keys.tenant_keys(tenant), key_id)
            await pipe.execute()
        return f"{KEY_PREFIX}.{tenant}.{key_id}.{secret}", key_id

    async def revoke_key(self, tenant: str, key_id: str) -> bool:
        """Delete key ``key_id`` of ``tenant``; False when there is no such key."""
        if not await self.redis.srem(keys.tenant_keys(tenant), key_id):
            return False
        await self.redis.delete(keys.api_key(key_id))
        return True

    async def authenticate(self, token: str) -> str | None:
        """The tenant of a valid API key, else None."""
        parsed = parse_api_key(token)
        if parsed is None:
            return None
        record = await self.redis.hmget(keys.api_key(parsed.key_id), list(KEY_RECORD_FIELDS))
        return parsed.tenant if verify_key_record(parsed, record) is not None else None
