"""A route class whose JSON request bodies are parsed by orjson.

FastAPI parses a JSON body with ``Request.json()`` (the standard library's
``json.loads``); on a 1000-instance predict body (64k numbers) that is a
large share of the request.  :class:`OrjsonRoute` hands the endpoint a
request whose ``json()`` tries orjson first and falls back to ``json.loads``
for anything orjson refuses (``NaN`` literals, non-UTF-8 encodings, lone
surrogates) and for bodies that may hold an integer of 20 or more digits
(orjson turns an integer beyond 64 bits into a float; ``json`` keeps it
exact), so every body parses exactly as before: same value, or the same
``JSONDecodeError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

#: Digits -> "d", "." and exponent markers -> ".", any other byte -> ",".  An integer
#: literal beyond 64 bits (which orjson turns into a float; ``json`` keeps it exact)
#: is a run of 20 or more digits at the start of a number, i.e. after a ","
#: (fractions and exponents follow a "."; "e-" also gives "," and just falls back).
#: A translate and a substring search cost a fraction of the parse; a regular
#: expression costs as much as ``json`` itself.
_CLASSES = bytes(0x64 if 0x30 <= b <= 0x39 else 0x2E if b in b".eE" else 0x2C
                 for b in range(256))
_LONG_INT = b"d" * 20


def may_hold_big_int(body: bytes) -> bool:
    """Whether ``body`` may hold an integer literal of 20 or more digits."""
    classes = body.translate(_CLASSES)
    return classes.startswith(_LONG_INT) or b"," + _LONG_INT in classes


def parse_json(body: bytes) -> Any:
    """``body`` parsed as ``json.loads`` parses it (the same value, or the same
    ``JSONDecodeError``), by orjson whenever that gives the same.

    >>> parse_json(b'[1.5, NaN, 123456789012345678901]')
    [1.5, nan, 123456789012345678901]
    """
    if may_hold_big_int(body):
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


class OrjsonRequest(Request):
    """A request whose JSON body is parsed by orjson (standard library fallback)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    """An API route whose endpoint gets an :class:`OrjsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return route_handler
