"""JSON responses rendered with orjson (numpy scalars and arrays allowed)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse


def dumps(content: Any) -> bytes:
    """The JSON bytes of a response document (numpy scalars and arrays, non-str keys)."""
    return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


class OrjsonResponse(JSONResponse):
    """A JSON response serialised by orjson."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
