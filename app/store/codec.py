"""Named numpy arrays <-> bytes, compact and fast.

Layout: the magic ``b"NLA1"``, a little-endian ``uint32`` header length, a
JSON header ``[[name, dtype, shape], ...]`` and then the raw C-ordered
buffers back to back.  Decoding is zero-copy (read-only views on the bytes);
callers that mutate must copy.

An array of :data:`SPARSE_MIN_ELEMENTS` or more whose non-zeros take less
than a quarter of its bytes as ``(index, value)`` pairs (a float64 array
less than 1/8 non-zero) is stored sparse: its header
entry is ``[name, dtype, shape, nnz]`` and its buffer the ``nnz`` flat
indices (``<i8``) then the ``nnz`` values.  It decodes to the same dense
array (a writable copy).  A sparse input of a wide model (3 non-zeros of
100,000 features) is then logged in about 200 bytes instead of 800 KB.
Narrower or denser arrays stay dense, so the trainer keeps reading a batch
of them with one ``np.frombuffer`` (:func:`decode_columns`; sparse blobs are
decoded one by one).

Every event of a model carries the same few headers, so parsed headers are
cached (:func:`layout`), and
:func:`decode_columns` decodes many blobs of one layout into columns with one
``np.frombuffer`` (a packed structured dtype) instead of one per array.

>>> import numpy as np
>>> blob = encode({"w_": np.eye(2), "t_": np.array(3)})
>>> out = decode(blob)
>>> out["w_"].tolist(), int(out["t_"])
([[1.0, 0.0], [0.0, 1.0]], 3)
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import orjson

MAGIC = b"NLA1"
_LEN = struct.Struct("<I")
#: dtypes a blob may carry (no object arrays: they would unpickle).
ALLOWED_KINDS = frozenset("biuf")
#: Arrays smaller than this are always stored dense.
SPARSE_MIN_ELEMENTS = 1024
#: The flat indices of a sparse array.
_INDEX = np.dtype("<i8")


class CodecError(ValueError):
    """A blob that is not a valid encoding of named arrays."""


def encode(arrays: Mapping[str, np.ndarray | SparseArray]) -> bytes:
    """Serialise named arrays (numeric dtypes only; mostly-zero ones sparse).

    A :class:`SparseArray` value (see :func:`stored_form`) gives the bytes of its dense
    array without making it.
    """
    header: list[list[Any]] = []
    buffers = []
    for name, value in arrays.items():
        if isinstance(value, SparseArray):
            if value.values.dtype.kind not in ALLOWED_KINDS:
                raise CodecError(f"array {name!r}: unsupported dtype {value.values.dtype}")
            if value.stored_sparse():
                header.append([name, value.values.dtype.str, list(value.shape),
                               len(value.indices)])
                buffers += [value.indices.astype(_INDEX).tobytes(), value.values.tobytes()]
                continue
            value = value.dense()
        arr = np.asarray(value)
        if arr.dtype.kind not in ALLOWED_KINDS:
            raise CodecError(f"array {name!r}: unsupported dtype {arr.dtype}")
        if arr.size >= SPARSE_MIN_ELEMENTS and _sparse_pays(
                np.count_nonzero(arr), arr.size, arr.dtype.itemsize):
            flat = arr.reshape(-1)
            index = np.flatnonzero(flat)
            header.append([name, arr.dtype.str, list(arr.shape), len(index)])
            buffers += [index.astype(_INDEX).tobytes(), flat[index].tobytes()]
        else:
            header.append([name, arr.dtype.str, list(arr.shape)])
            buffers.append(arr.tobytes())
    head = orjson.dumps(header)
    return b"".join([MAGIC, _LEN.pack(len(head)), head, *buffers])


def _sparse_pays(nnz: Any, size: int, itemsize: int) -> Any:
    """Whether ``nnz`` (index, value) pairs take less than a quarter of the dense bytes
    (elementwise for an array of counts)."""
    return nnz * (_INDEX.itemsize + itemsize) * 4 < size * itemsize


def encode_many(items: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """:func:`encode` of each mapping (the same bytes), at once when they share one layout.

    The decision contexts of a batch predict (up to 1000) all have the same
    fields, dtypes and shapes: each field is stacked with one ``np.asarray``,
    all records are packed into one buffer, and every blob is the shared
    header plus its slice of it (about a tenth of the CPU of one
    :func:`encode` per item).  Items whose layouts differ (or values that
    are not of one Python or numpy type per field) are encoded one by one.

    >>> items = [{"x": np.arange(2.0) + i, "k": i} for i in range(3)]
    >>> encode_many(items) == [encode(item) for item in items]
    True
    """
    columns = _columns(items) if len(items) > 1 else None
    if columns is None:
        return [encode(item) for item in items]
    return encode_columns(columns)


def encode_columns(columns: Mapping[str, np.ndarray]) -> list[bytes]:
    """:func:`encode` of each row ``{name: column[i]}`` of equally long columns, at once.

    All records are packed into one buffer; every blob is the shared header
    plus its slice of it.  When a row of a wide column would be stored sparse
    (see the module's doc), the rows are encoded one by one.

    >>> cols = {"x": np.arange(4.0).reshape(2, 2), "k": np.arange(2)}
    >>> encode_columns(cols) == [encode({"x": c, "k": k}) for c, k in zip(cols["x"], cols["k"])]
    True
    """
    n = len(next(iter(columns.values())))
    if n == 0:
        return []
    for col in columns.values():
        width = math.prod(col.shape[1:])
        if width >= SPARSE_MIN_ELEMENTS and _sparse_pays(
                np.count_nonzero(col.reshape(n, width), axis=1), width,
                col.dtype.itemsize).any():
            return [encode({name: c[i] for name, c in columns.items()}) for i in range(n)]
    records = np.empty(n, dtype=[(name, col.dtype, col.shape[1:])
                                 for name, col in columns.items()])
    for name, col in columns.items():
        records[name] = col
    first = encode({name: col[0] for name, col in columns.items()})
    size = records.dtype.itemsize
    prefix = first[:len(first) - size]
    payload = records.tobytes()
    return [prefix + payload[i * size:(i + 1) * size] for i in range(n)]


def _columns(items: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray] | None:
    """Each field of ``items`` stacked on a new axis 0; None when their layouts may differ."""
    names = tuple(items[0])
    if any(len(item) != len(names) for item in items):
        return None
    columns = {}
    for name in names:
        try:
            values = [item[name] for item in items]
        except KeyError:
            return None
        kinds = set(map(type, values))
        if len(kinds) != 1 or SparseArray in kinds:
            return None
        if kinds == {np.ndarray} and len({(v.dtype, v.shape) for v in values}) != 1:
            return None
        col = np.asarray(values)
        if col.dtype.kind not in ALLOWED_KINDS:
            return None
        columns[name] = col
    return columns


@dataclass(frozen=True)
class Layout:
    """A parsed header: the arrays' names, dtypes and shapes, and the payload size."""

    fields: tuple[tuple[str, np.dtype, tuple[int, ...], int, int | None], ...]
    """``(name, dtype, shape, element count, stored non-zeros or None when dense)`` in
    buffer order."""
    nbytes: int

    @property
    def sparse(self) -> bool:
        """Whether an array is stored sparse (its records differ in size from blob to blob)."""
        return any(nnz is not None for *_, nnz in self.fields)

    @property
    def record(self) -> np.dtype:
        """The payload as one packed structured record (one field per array)."""
        return np.dtype([(name, dtype, shape) for name, dtype, shape, *_ in self.fields])


@lru_cache(maxsize=1024)
def layout(head: bytes) -> Layout:
    """Parse and check a JSON header (cached: a model's blobs share a few headers)."""
    try:
        header = orjson.loads(head)
        fields = []
        nbytes = 0
        for name, dtype_str, shape, *sparse in header:
            dtype = np.dtype(dtype_str)
            if dtype.kind not in ALLOWED_KINDS:
                raise CodecError(f"array {name!r}: unsupported dtype {dtype}")
            dims = tuple(int(n) for n in shape)
            if any(n < 0 for n in dims):
                raise CodecError(f"array {name!r}: negative dimension")
            count = math.prod(dims)
            nnz = int(sparse[0]) if sparse else None
            if nnz is not None and not 0 <= nnz <= count:
                raise CodecError(f"array {name!r}: {nnz} non-zeros of {count}")
            fields.append((str(name), dtype, dims, count, nnz))
            nbytes += (count * dtype.itemsize if nnz is None
                       else nnz * (_INDEX.itemsize + dtype.itemsize))
    except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"bad header: {exc}") from None
    return Layout(tuple(fields), nbytes)


def _split(blob: bytes) -> tuple[Layout, int]:
    """The blob's layout and payload offset; checks magic and total size."""
    if len(blob) < 8 or blob[:4] != MAGIC:
        raise CodecError("not a noisyloop array blob")
    (n_head,) = _LEN.unpack_from(blob, 4)
    offset = 8 + n_head
    if offset > len(blob):
        raise CodecError("truncated header")
    lay = layout(bytes(blob[8:offset]))
    if offset + lay.nbytes > len(blob):
        raise CodecError("truncated blob")
    if offset + lay.nbytes != len(blob):
        raise CodecError("trailing bytes after the last array")
    return lay, offset


def decode(blob: bytes) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode`; raises :class:`CodecError` on a malformed blob."""
    return {name: value.dense() if isinstance(value, SparseArray) else value
            for name, value in decode_stored(blob).items()}


@dataclass(frozen=True)
class SparseArray:
    """An array as stored sparse: its ``shape``, the flat ``indices`` (ascending) of its
    non-zeros and their ``values`` (read-only views on the blob)."""

    shape: tuple[int, ...]
    indices: np.ndarray
    values: np.ndarray

    def stored_sparse(self) -> bool:
        """Whether :func:`encode` stores the dense array sparse (then as these very
        non-zeros)."""
        size = math.prod(self.shape)
        return bool(size >= SPARSE_MIN_ELEMENTS and self.values.all() and _sparse_pays(
            len(self.indices), size, self.values.dtype.itemsize))

    def dense(self) -> np.ndarray:
        """The dense array (what :func:`decode` returns for it)."""
        out = np.zeros(math.prod(self.shape), dtype=self.values.dtype)
        out[self.indices] = self.values
        return out.reshape(self.shape)

    def row(self, k: int) -> SparseArray:
        """Row ``k`` of a 2-D array (its indices within the row), still sparse."""
        width = math.prod(self.shape[1:])
        low, high = np.searchsorted(self.indices, [k * width, (k + 1) * width])
        return SparseArray(self.shape[1:], self.indices[low:high] - k * width,
                           self.values[low:high])


def stored_form(value: Any) -> Any:
    """``value`` as small as :func:`encode` stores it: an array that would be stored sparse
    becomes the :class:`SparseArray` of its non-zeros (which encodes to the same bytes),
    another array of :data:`SPARSE_MIN_ELEMENTS` or more an own copy (not a view that would
    keep the matrix it is a row of); smaller arrays and scalars are returned as they are.

    A decision's context made from a row of a wide batch then holds its non-zeros only.

    >>> x = np.zeros(100_000); x[7] = 2.0
    >>> kept = stored_form(x)
    >>> kept.indices.tolist(), kept.values.tolist(), encode({"x": kept}) == encode({"x": x})
    ([7], [2.0], True)
    """
    if not isinstance(value, np.ndarray) or value.size < SPARSE_MIN_ELEMENTS:
        return value
    flat = value.reshape(-1)
    index = np.flatnonzero(flat)
    if value.dtype.kind in ALLOWED_KINDS and _sparse_pays(len(index), value.size,
                                                         value.dtype.itemsize):
        return SparseArray(value.shape, index.astype(_INDEX), flat[index])
    return value.copy()


def stored_forms(arrays: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`stored_form` of each value (a decision's context kept as the log stores it)."""
    return {name: stored_form(value) for name, value in arrays.items()}


def decode_stored(blob: bytes) -> dict[str, np.ndarray | SparseArray]:
    """:func:`decode`, but each array stored sparse stays a :class:`SparseArray` (no dense
    copy: a wide context costs its non-zeros, not its width)."""
    lay, offset = _split(blob)
    out: dict[str, np.ndarray | SparseArray] = {}
    for name, dtype, shape, count, nnz in lay.fields:
        if nnz is None:
            out[name] = np.frombuffer(blob, dtype=dtype, count=count,
                                      offset=offset).reshape(shape)
            offset += count * dtype.itemsize
            continue
        index = np.frombuffer(blob, dtype=_INDEX, count=nnz, offset=offset)
        offset += nnz * _INDEX.itemsize
        if nnz and not (index.min() >= 0 and index.max() < count
                        and (np.diff(index) > 0).all()):
            raise CodecError(f"array {name!r}: sparse indices out of range or order")
        out[name] = SparseArray(shape, index, np.frombuffer(blob, dtype=dtype, count=nnz,
                                                            offset=offset))
        offset += nnz * dtype.itemsize
    return out


class DenseOnRead(Mapping[str, np.ndarray]):
    """A decoded blob whose arrays stored sparse are made dense only when read, one at a
    time and not kept: a reader that looks at a context's ids alone never pays for its
    width, and one that reads ``x`` holds one dense copy at a time.

    >>> blob = encode({"x": np.eye(1, 100_000).ravel(), "ids": np.arange(3)})
    >>> context = DenseOnRead(blob)
    >>> context["ids"].tolist(), context["x"].shape, sorted(context)
    ([0, 1, 2], (100000,), ['ids', 'x'])
    """

    def __init__(self, blob: bytes) -> None:
        self._stored = decode_stored(blob)

    def __getitem__(self, name: str) -> np.ndarray:
        value = self._stored[name]
        return value.dense() if isinstance(value, SparseArray) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)


def decode_columns(blobs: Sequence[bytes]) -> dict[str, np.ndarray] | None:
    """Decode blobs of one layout into columns (each array stacked on a new axis 0).

    The blobs are joined into one ``(n, size)`` byte matrix: one comparison
    checks that every header equals the first, and the payload columns are
    read as packed records; the columns are contiguous, writable copies.
    Returns None when the blobs do not all share one layout (e.g.
    variable-length fields) or carry no payload; raises
    :class:`CodecError` on a malformed blob.

    >>> blobs = [encode({"x": np.arange(2.0) + i, "k": np.array(i)}) for i in range(3)]
    >>> cols = decode_columns(blobs)
    >>> cols["x"].tolist(), cols["k"].tolist()
    ([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]], [0, 1, 2])
    """
    if not blobs:
        return None
    first, offset = _split(blobs[0])
    size = len(blobs[0])
    if first.nbytes == 0 or first.sparse or set(map(len, blobs)) != {size}:
        return None
    rows = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), size)
    if not (rows[:, :offset] == rows[0, :offset]).all():
        return None  # same size, other header: another layout
    # same header and size: the same (checked) layout, no trailing bytes
    records = np.ascontiguousarray(rows[:, offset:]).view(first.record).reshape(len(blobs))
    return {name: np.array(records[name], dtype=dtype)
            for name, dtype, *_ in first.fields}
