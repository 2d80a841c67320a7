"""The orjson request body parser gives exactly what ``json.loads`` gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.api.routing import OrjsonRequest

BODIES = [b'{"instances": [[0.1, 2, -3e-5]], "explore": false}', b"[NaN, Infinity]",
          b"123456789012345678901234567890", b"[-18446744073709551617]",
          b"18446744073709551615", b"[1e400]", b'"\\ud800"', b'{"a": 1, "a": 2}',
          "[\"\u00e9\"]".encode("utf-16"), b"\xef\xbb\xbf[1]", b"{bad", b"[1] x", b""]


async def _parse(body: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    request = OrjsonRequest({"type": "http", "method": "POST", "headers": []}, receive)
    try:
        return await request.json()
    except json.JSONDecodeError as exc:
        return ("error", type(exc), exc.msg, exc.pos)


def _reference(body: bytes) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        return ("error", type(exc), exc.msg, exc.pos)


@pytest.mark.parametrize("body", BODIES)
async def test_orjson_request_parses_like_json_loads(body: bytes) -> None:
    got, want = await _parse(body), _reference(body)
    assert repr(got) == repr(want)
    assert type(got) is type(want)
