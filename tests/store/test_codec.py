"""Codec edge cases and the columnar batch decode used by the trainer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.learners.base import stack_events
from app.store.codec import (
    SPARSE_MIN_ELEMENTS,
    CodecError,
    decode,
    decode_columns,
    encode,
    encode_many,
)
from app.store.events import decode_entries, decode_entry


def _entry(i: int, feedback: dict[str, np.ndarray]) -> tuple[bytes, bytes]:
    """A stream entry's context and feedback blobs."""
    rng = np.random.default_rng(i)
    ctx = {"x": rng.normal(size=5), "greedy": i % 3, "played": (i + 1) % 3, "prob": 0.25 + i}
    return encode(ctx), encode(feedback)


@pytest.mark.parametrize("blob", [b"", b"NLA0\x02\x00\x00\x00[]", b"NLA1\x09\x00\x00\x00[]",
                                  encode({"a": np.ones(2)})[:-1],
                                  encode({"a": np.ones(2)}) + b"\x00"])
def test_decode_malformed_raises(blob: bytes) -> None:
    with pytest.raises(CodecError):
        decode(blob)


def test_decode_object_dtype_refused() -> None:
    blob = encode({"a": np.ones(1)}).replace(b"<f8", b"|O8")
    with pytest.raises(CodecError):
        decode(blob)


def test_decode_entries_equals_one_by_one() -> None:
    entries = [_entry(i, {"click": np.array(float(i % 2))}) for i in range(7)]
    columns = decode_entries([c for c, _ in entries], [f for _, f in entries])
    assert columns is not None
    expected = stack_events([decode_entry(c, f) for c, f in entries])
    assert list(columns) == list(expected)
    for name, col in expected.items():
        assert columns[name].dtype == col.dtype and columns[name].shape == col.shape
        assert columns[name].flags.writeable and columns[name].flags.c_contiguous
        np.testing.assert_array_equal(columns[name], col)


def test_decode_entries_mixed_layouts_returns_none() -> None:
    entries = [_entry(0, {"values": np.ones(1)}), _entry(1, {"values": np.ones(2)})]
    assert decode_entries([c for c, _ in entries], [f for _, f in entries]) is None
    # same size, another header
    assert decode_columns([encode({"a": np.ones(1)}), encode({"b": np.ones(1)})]) is None
    assert decode_columns([encode({"a": np.ones(2)}), encode({"a": np.ones((1, 2))})]) is None
    assert decode_columns([encode({})]) is None  # no payload to read


def test_decode_entries_malformed_or_missing_returns_none() -> None:
    ctx, fb = _entry(0, {"click": np.array(1.0)})
    assert decode_entries([ctx, ctx[:-3]], [fb, fb]) is None
    assert decode_entries([ctx], [None]) is None
    with pytest.raises(CodecError):
        decode_entry(ctx, None)


def _contexts(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.random(5), "greedy": int(rng.integers(3)), "played": np.int64(1),
             "prob": float(rng.random()), "m": rng.random((2, 3)).astype(np.float32)}
            for _ in range(n)]


def test_encode_many_gives_encodes_bytes_and_decodes_by_columns() -> None:
    items = _contexts(50)
    blobs = encode_many(items)
    assert blobs == [encode(item) for item in items]
    cols = decode_columns(blobs)
    assert cols is not None and cols["m"].dtype == np.float32
    assert np.array_equal(cols["x"], np.stack([item["x"] for item in items]))


@pytest.mark.parametrize("change", [
    lambda c: c.update(greedy=1.5),                        # another Python type
    lambda c: c.update(x=np.arange(4.0)),                  # another shape
    lambda c: c.update(m=np.zeros((2, 3))),                # another dtype
    lambda c: c.pop("prob"),                               # a field missing
    lambda c: c.update(extra=np.zeros(1)),                 # a field more
])
def test_encode_many_falls_back_per_item_when_layouts_differ(change: Any) -> None:
    items = _contexts(5)
    change(items[3])
    assert encode_many(items) == [encode(item) for item in items]


def test_encode_many_refuses_what_encode_refuses() -> None:
    items = [{"x": np.array(["a", "b"])}, {"x": np.array(["c", "d"])}]
    with pytest.raises(CodecError):
        encode_many(items)


def _wide_sparse(i: int, width: int = 100_000) -> dict[str, Any]:
    x = np.zeros(width)
    x[[i, 1000 + i, width - 1 - i]] = [1.0, -0.5, 2.0]
    return {"x": x, "played": i % 3, "prob": 0.5}


def test_mostly_zero_arrays_stored_sparse_decode_equal() -> None:
    items = [_wide_sparse(i) for i in range(4)]
    blobs = encode_many(items)
    assert blobs == [encode(item) for item in items]
    assert all(len(blob) < 200 for blob in blobs)  # dense: 800 KB each
    for item, blob in zip(items, blobs, strict=True):
        out = decode(blob)
        assert np.array_equal(out["x"], item["x"]) and out["x"].dtype == np.float64
        assert int(out["played"]) == item["played"]
    assert decode_columns(blobs) is None  # the trainer decodes them one by one
    columns = decode_entries(blobs, [encode({"click": np.array(1.0)})] * 4)
    assert columns is None
    assert np.array_equal(decode_entry(blobs[2], encode({"click": np.array(1.0)}))["x"],
                          items[2]["x"])


def test_small_or_dense_arrays_stay_dense() -> None:
    synsep_like = np.zeros(4000)
    synsep_like[::8] = 1.0  # 1/8 non-zero: a quarter of the bytes, not less
    for arr in (np.zeros(SPARSE_MIN_ELEMENTS - 1), np.arange(1.0, 2001.0), synsep_like,
                np.eye(40)):  # an identity matrix: 40 non-zeros of 1600, sparse
        blob = encode({"a": arr})
        assert np.array_equal(decode(blob)["a"], arr)
        sparse = len(blob) < arr.nbytes
        assert sparse == (arr.shape == (40, 40)), arr.shape


def test_sparse_index_out_of_range_refused() -> None:
    x = np.zeros(2000)
    x[5] = 1.0
    blob = encode({"x": x})
    index = (5).to_bytes(8, "little")
    with pytest.raises(CodecError, match="out of range"):
        decode(blob.replace(index, (2000).to_bytes(8, "little")))
