"""Named numpy arrays <-> bytes, compact and fast.

Layout: the magic ``b"NLA1"``, a little-endian ``uint32`` header length, a
JSON header ``[[name, dtype, shape], ...]`` and then the raw C-ordered
buffers back to back.  Decoding is zero-copy (read-only views on the bytes);
callers that mutate must copy.

>>> import numpy as np
>>> blob = encode({"w_": np.eye(2), "t_": np.array(3)})
>>> out = decode(blob)
>>> out["w_"].tolist(), int(out["t_"])
([[1.0, 0.0], [0.0, 1.0]], 3)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import numpy as np
import orjson

MAGIC = b"NLA1"
_LEN = struct.Struct("<I")
#: dtypes a blob may carry (no object arrays: they would unpickle).
ALLOWED_KINDS = frozenset("biuf")


class CodecError(ValueError):
    """A blob that is not a valid encoding of named arrays."""


def encode(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Serialise named arrays (numeric dtypes only)."""
    header = []
    buffers = []
    for name, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in ALLOWED_KINDS:
            raise CodecError(f"array {name!r}: unsupported dtype {arr.dtype}")
        header.append([name, arr.dtype.str, list(arr.shape)])
        buffers.append(arr.tobytes())
    head = orjson.dumps(header)
    return b"".join([MAGIC, _LEN.pack(len(head)), head, *buffers])


def decode(blob: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode`; raises :class:`CodecError` on a malformed blob."""
    if len(blob) < 8 or blob[:4] != MAGIC:
        raise CodecError("not a noisyloop array blob")
    (n_head,) = _LEN.unpack_from(blob, 4)
    offset = 8 + n_head
    try:
        header = orjson.loads(blob[8:offset])
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"bad header: {exc}") from None
    out: dict[str, np.ndarray] = {}
    for name, dtype_str, shape in header:
        dtype = np.dtype(dtype_str)
        if dtype.kind not in ALLOWED_KINDS:
            raise CodecError(f"array {name!r}: unsupported dtype {dtype}")
        count = int(np.prod(shape, dtype=np.int64))
        end = offset + count * dtype.itemsize
        if end > len(blob):
            raise CodecError(f"array {name!r}: truncated blob")
        out[name] = np.frombuffer(blob, dtype=dtype, count=count, offset=offset).reshape(shape)
        offset = end
    if offset != len(blob):
        raise CodecError("trailing bytes after the last array")
    return out
