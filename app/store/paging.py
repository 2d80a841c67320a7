"""Pages of a list a tenant can grow, bounded by bytes as well as items.

A list route (dead letters, kept versions, the quality series) answers at
most ``limit`` items and at most :data:`MAX_PAGE_BYTES` of them as JSON (one
larger item alone is a page), so that one request takes a bounded share of the
process whatever the list holds; a page cut by either bound says where the
next one starts.  The items come from a reader that fetches them from Redis a
few at a time (:func:`take_page` stops it as soon as the page is full).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any, TypeVar

import orjson

#: Bytes of JSON a page of a list holds at most, whatever its ``limit``.
MAX_PAGE_BYTES = 4 * 1024 * 1024

T = TypeVar("T")


def json_size(item: Any) -> int:
    """Bytes of ``item`` as JSON (dataclasses, dicts and lists of JSON values)."""
    return len(orjson.dumps(item))


async def take_page(items: AsyncGenerator[T, None], limit: int, max_bytes: int | None = None,
                    size: Callable[[T], int] = json_size) -> tuple[list[T], bool]:
    """The first items of ``items``, at most ``limit`` and ``max_bytes`` of them by ``size``
    (default :data:`MAX_PAGE_BYTES`; the first is taken whatever its size), and whether an
    item is left after them (the reader is closed once the page is full)."""
    most = MAX_PAGE_BYTES if max_bytes is None else max_bytes
    out: list[T] = []
    used = 0
    async with aclosing(items):
        async for item in items:
            n = size(item)
            if len(out) == limit or (out and used + n > most):
                return out, True
            out.append(item)
            used += n
    return out, False
