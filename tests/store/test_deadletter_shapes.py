"""A dead letter lists the shapes of a wide context stored sparse without expanding it."""

from __future__ import annotations

import numpy as np

from app.store import codec
from app.store.deadletters import parse_dead_letter


def test_a_wide_sparse_context_is_listed_by_its_shape() -> None:
    x = np.zeros(100_000)
    x[42] = 1.0
    fields = {b"c": codec.encode({"x": x, "played": np.array(2)}),
              b"f": codec.encode({"click": np.array(1.0)}), b"stream_id": b"7-0",
              b"e": b"e1", b"k": b"feedback", b"reason": b"boom", b"deliveries": b"3"}
    letter = parse_dead_letter(b"9-0", fields)
    assert letter.fields == {"x": [100_000], "played": [], "click": []}
    assert letter.feedback == {"click": 1.0}
