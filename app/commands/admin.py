"""``noisyloop admin``: tenants and keys without HTTP (bootstrap).

Talks to ``--redis-url`` / ``REDIS_URL``, else to the embedded Redis that a
running ``noisyloop serve`` published in the data directory, else starts
the embedded Redis of the data directory for the duration of the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from app.commands.arguments import add_service_arguments, settings_from_args
from app.server.datadir import redis_for


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("admin", help="manage tenants and API keys")
    actions = parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create-tenant", help="create a tenant and print its API key")
    create.add_argument("tenant_id")
    key = actions.add_parser("create-key", help="issue another API key for a tenant")
    key.add_argument("tenant_id")
    revoke = actions.add_parser("revoke-key", help="revoke an API key")
    revoke.add_argument("tenant_id")
    revoke.add_argument("key_id")
    actions.add_parser("list-tenants", help="list tenants")
    for sub in (create, key, revoke, actions.choices["list-tenants"]):
        add_service_arguments(sub, http=False)
    parser.set_defaults(handler=run)


async def _run(url: str, args: argparse.Namespace) -> tuple[int, object]:
    from app.store import Store
    from app.store.tenants import TENANT_ID_RE

    store = Store.from_url(url)
    try:
        if args.action == "create-tenant":
            if not TENANT_ID_RE.match(args.tenant_id):
                return 2, {"error": f"tenant id must match {TENANT_ID_RE.pattern}"}
            if not await store.tenants.create(args.tenant_id):
                return 1, {"error": f"tenant {args.tenant_id!r} exists"}
            api_key, key_id = await store.tenants.create_key(args.tenant_id)
            return 0, {"tenant_id": args.tenant_id, "api_key": api_key, "key_id": key_id}
        if args.action == "list-tenants":
            return 0, {"tenants": [t.__dict__ for t in await store.tenants.list_all()]}
        if not await store.tenants.exists(args.tenant_id):
            return 1, {"error": f"no tenant {args.tenant_id!r}"}
        if args.action == "create-key":
            api_key, key_id = await store.tenants.create_key(args.tenant_id)
            return 0, {"api_key": api_key, "key_id": key_id}
        if not await store.tenants.revoke_key(args.tenant_id, args.key_id):
            return 1, {"error": f"no key {args.key_id!r}"}
        return 0, {"revoked": args.key_id}
    finally:
        await store.close()


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with redis_for(settings) as url:
        code, doc = asyncio.run(_run(url, args))
    print(json.dumps(doc, indent=2))
    return code
