"""Shared LO machinery: the fast row update of one event."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.linear import Terms, lo_update_one


@pytest.mark.parametrize("up, down", [(1, 2), (2, 2), (np.int64(0), np.int64(3))])
def test_lo_update_one_fast_path_equals_general_path(up: int, down: int) -> None:
    rng = np.random.default_rng(2)
    W0, x = rng.standard_normal((4, 5)), rng.standard_normal(5)
    fast, general = W0.copy(), W0.copy()
    lo_update_one(fast, x, Terms(up, 1.7, down))
    lo_update_one(general, x, Terms(np.array([up]), np.array([1.7]), np.array([down])))
    np.testing.assert_array_equal(fast, general)
