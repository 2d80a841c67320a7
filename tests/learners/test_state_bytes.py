"""Every registered learner declares its state size, computed from the shapes alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.learners.registry import ALGORITHMS, build, default_params, learner_class, takes_classes

#: Parameter variants that change the shapes of the state.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "soba": [{"diagonal": False}, {"diagonal": True}],
    "uma": [{"window": 7}, {"kernel": "gaussian:2", "n_components": 5}],
    "kernel_ogd": [{"budget": 6, "max_order": 4}, {"explicit_dim": 30, "max_order": 5},
                   {"naive": True, "budget": 3}, {"naive": True, "kernel": "linear"}],
    "rcine": [{"n_s": 100}],
    "linucb": [{}, {"max_features": 6}],
}


@pytest.mark.parametrize(("task", "algorithm"), sorted(ALGORITHMS))
@pytest.mark.parametrize(("n_features", "n_classes"), [(3, 4), (6, 2), (1, 3)])
def test_state_bytes_equals_the_built_state(task: str, algorithm: str, n_features: int,
                                            n_classes: int) -> None:
    cls = learner_class(task, algorithm)
    k = n_classes if takes_classes(cls) else None
    for variant in VARIANTS.get(algorithm, [{}]):
        if algorithm in ("mc_dbf", "mc_slp") and n_classes == 2:
            variant = {**variant, "m": 1}
        learner = build(task, algorithm, n_features, k, variant, seed=0)
        actual = sum(a.nbytes for a in learner.get_state().values())
        params = {**default_params(cls), **variant}
        assert cls.state_bytes(n_features, k, params) == actual, variant


def test_state_bytes_grows_without_allocating() -> None:
    cls = learner_class("label", "linucb")
    params = default_params(cls)
    # 10,000 labels of 1,000 x 1,000 matrices (160 GB): only a number
    assert cls.state_bytes(1000, 10_000, params) == 8 * (2 * 10_000 * 1000**2 + 10**7 + 2)


def test_rcine_counts_its_nrest_buffer() -> None:
    cls = learner_class("label", "rcine")
    params = {**default_params(cls), "n_s": 200}
    assert cls.buffer_bytes(10, 3, params) == 200 * 8 * 12
    assert learner_class("label", "rcnbf").buffer_bytes(10, 3, params) == 0


def test_state_bytes_refuses_a_size_parameter_of_the_wrong_type() -> None:
    cls = learner_class("noisy_input", "kernel_ogd")
    with pytest.raises(ValueError, match="budget"):
        cls.state_bytes(4, None, {**default_params(cls), "budget": "many"})
    assert np.isfinite(cls.state_bytes(4, None, default_params(cls)))
