"""JSON bodies and messages: orjson when it is installed, the standard library otherwise.

The client needs no compiled dependency: ``pip install noisyloop-client``
brings httpx and websockets only.  With the ``fast`` extra (orjson) numpy
arrays and scalars are serialised directly, without per-element Python
floats; without it they are turned into lists (``tolist()``) first, which
gives the same JSON.

>>> loads(dumps({"features": [0.5, 1]}))
{'features': [0.5, 1]}
"""

from __future__ import annotations

import json
from typing import Any

#: What a malformed answer raises (orjson's error is a subclass of it).
DecodeError = json.JSONDecodeError


def _tolist(value: Any) -> Any:
    """A numpy array or scalar (anything with ``tolist``) as plain Python values."""
    tolist = getattr(value, "tolist", None)
    if tolist is None:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return tolist()


try:
    import orjson
except ImportError:  # the client without its ``fast`` extra
    def dumps(value: Any) -> bytes:
        """``value`` as compact JSON bytes (numpy arrays and scalars allowed)."""
        return json.dumps(value, separators=(",", ":"), default=_tolist).encode()

    def loads(data: bytes | str) -> Any:
        """The JSON document ``data`` decoded."""
        return json.loads(data)
else:
    def dumps(value: Any) -> bytes:
        """``value`` as compact JSON bytes (numpy arrays and scalars allowed)."""
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)

    def loads(data: bytes | str) -> Any:
        """The JSON document ``data`` decoded."""
        return orjson.loads(data)
