"""The orjson request body parser gives exactly what ``json.loads`` gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.api.routing import OrjsonRequest, may_hold_big_int

BODIES = [b'{"instances": [[0.1, 2, -3e-5]], "explore": false}',
          b"[0.00019000160734350402, 123456789012345678901.5, 1e-00000000000000000001]",
          b"[NaN, Infinity]",
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


@pytest.mark.parametrize("body, big", [
    (b"[0.00019000160734350402, 1.2345678901234567e-20]", False),  # long fractions: orjson
    (b"[1234567890123456789]", False),
    (b"12345678901234567890", True), (b"[-12345678901234567890]", True),
    (b'{"label": 98765432109876543210}', True)])
def test_may_hold_big_int_only_for_long_integer_parts(body: bytes, big: bool) -> None:
    assert may_hold_big_int(body) is big
