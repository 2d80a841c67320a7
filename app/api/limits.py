"""Limits checked on raw request bytes, before any parsing: JSON nesting depth.

Python's ``json`` module recurses once per nesting level, so a body of a
few kilobytes of ``[[[[...`` costs a deep recursion (and, past the
interpreter's limit, an error deep inside the framework).  :func:`json_depth`
measures the nesting of a raw body at C speed (strings removed by one
regular expression, brackets counted with numpy), so the middleware and the
WebSocket route can refuse a too deep document before it is parsed.
"""

from __future__ import annotations

import re

import numpy as np

from app.api.errors import ApiError

#: A JSON string with its escapes (unrolled loop: one pass, no backtracking).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: +1 for an opening bracket, -1 for a closing one, 0 for any other byte.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


#: Every byte but the four brackets (deleted first: a 1000-instance predict body
#: is about a megabyte of numbers and a few thousand brackets).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _bracket_depth(data: bytes) -> int:
    """Deepest bracket nesting, counting every bracket (also those inside strings)."""
    brackets = data.translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    steps = _STEP[np.frombuffer(brackets, dtype=np.uint8)]
    return max(int(np.cumsum(steps, dtype=np.int32).max()), 0)


def json_depth(data: bytes) -> int:
    """Deepest nesting of arrays and objects in ``data`` (valid JSON or not).

    >>> json_depth(b'{"a": [1, {"b": "[[[["}]}')
    3
    >>> json_depth(b'17')
    0
    """
    return _bracket_depth(_STRING.sub(b"", data))


def too_deep(max_depth: int) -> ApiError:
    return ApiError(422, "json_too_deep",
                    f"JSON nesting exceeds {max_depth} levels of arrays/objects")


def check_json_depth(data: bytes, max_depth: int) -> None:
    """Raise 422 ``json_too_deep`` when ``data`` nests deeper than ``max_depth``.

    Cheap bounds first (the number of opening brackets, then the nesting with
    brackets inside strings counted too); strings are removed only when those
    bounds exceed the limit.
    """
    if data.count(b"[") + data.count(b"{") <= max_depth or \
            _bracket_depth(data) <= max_depth:
        return
    if json_depth(data) > max_depth:
        raise too_deep(max_depth)
