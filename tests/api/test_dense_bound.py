"""A predict batch of wide sparse contexts is made dense in spans of at most
``max_dense_cells`` float64 cells, with the decisions of one span for the whole batch."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from app.api.decisionrequest import DecisionOptions, DecisionRequest
from app.api.decisions import decide_predictions
from app.errors import ApiError
from app.fields import SparseFeatures
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import codec

WIDTH = 100_000
ROWS = 200
#: Cells of one span in these tests: 10 rows of WIDTH (8 MB of float64).
CELLS = 10 * WIDTH


def _config(**more: object) -> ModelConfig:
    return ModelConfig.of({"model_id": "wide", "task": "label", "algorithm": "rcnbf",
                           "n_features": WIDTH, "n_classes": 3, "seed": 0, "params": {},
                           **more})


def _request(rows: int = ROWS, explore: bool = True, baseline: list[int] | None = None
             ) -> DecisionRequest:
    contexts: list = [SparseFeatures(indices=[(7919 * i) % WIDTH], values=[1.0 + i % 3])
                      for i in range(rows)]
    return DecisionRequest(contexts, None, [DecisionOptions(explore, False, None, baseline)],
                           True)


def test_decide_predictions_wide_sparse_batch_holds_at_most_the_bound() -> None:
    config = _config()
    learner = build_learner(config)
    learner.W_[:] = np.random.default_rng(0).normal(size=learner.W_.shape)
    request = _request()
    tracemalloc.start()
    try:
        decide_predictions(learner, request, config, CELLS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Span-sized arrays live at once: the span's matrix, and the learner's copy of it and
    # its |X| (explore_decisions' rounding bound) - or the first span kept while another is
    # checked; one more span of slack covers the 200 contexts kept sparse (~200 B each),
    # the decisions, and |W| (3 x WIDTH floats, 2.4 MB).  Unbounded, the batch is
    # 200 x 800 KB = 160 MB, made twice (its rows, then their stack).
    tolerance = 4 * CELLS * 8
    assert peak <= tolerance, f"peak {peak:,} B > {tolerance:,} B"


def test_decide_predictions_spans_give_the_decisions_of_one_span() -> None:
    config = _config()
    outs = []
    for cells in (WIDTH, 7 * WIDTH, ROWS * WIDTH):  # 1, 7 (a partial last) and all rows
        learner = build_learner(config)
        learner.W_[:] = np.random.default_rng(1).normal(size=learner.W_.shape)
        made = decide_predictions(learner, _request(), config, cells)
        outs.append(([d.output for d in made.decisions],
                     [codec.encode(c) for c in made.contexts if c is not None]))
    assert len(outs[0][1]) == ROWS
    assert outs[1] == outs[0] and outs[2] == outs[0]


def test_decide_predictions_keeps_contexts_as_stored() -> None:
    config = _config()
    made = decide_predictions(build_learner(config), _request(3), config, CELLS)
    for i, context in enumerate(made.contexts):
        assert context is not None
        x = context["x"]
        assert isinstance(x, codec.SparseArray)  # the non-zero, not a view of the batch
        assert x.indices.tolist() == [(7919 * i) % WIDTH]
        dense = np.zeros(WIDTH)
        dense[(7919 * i) % WIDTH] = 1.0 + i % 3
        assert codec.encode(context) == codec.encode({**context, "x": dense})


def test_decide_predictions_apprentice_baselines_follow_their_span() -> None:
    config = _config(mode="apprentice")
    baseline = [i % 3 for i in range(25)]
    made = decide_predictions(build_learner(config), _request(25, baseline=baseline),
                              config, 4 * WIDTH)
    assert [d.output["label"] for d in made.decisions] == baseline
    assert made.agreed is not None and len(made.agreed) == 25


def test_decide_predictions_bad_row_of_a_later_span_refused_before_any_decision() -> None:
    config = _config()
    learner = build_learner(config)
    request = _request(30)
    request.contexts[25] = SparseFeatures(indices=[WIDTH], values=[1.0])
    state = learner._rng.bit_generator.state
    with pytest.raises(ApiError) as exc:
        decide_predictions(learner, request, config, 10 * WIDTH)
    assert exc.value.field == "instances[25].indices[0]"
    assert learner._rng.bit_generator.state == state  # no span was decided


@pytest.mark.parametrize("nonzero", [1, 5_000, 50_000])
def test_stored_form_encodes_as_the_dense_array(nonzero: int) -> None:
    x = np.zeros(WIDTH)
    x[np.random.default_rng(nonzero).choice(WIDTH, nonzero, replace=False)] = 2.5
    batch = np.stack([x, x])
    kept = codec.stored_form(batch[0])
    assert codec.encode({"x": kept}) == codec.encode({"x": x})
    assert codec.encode_many([{"x": kept, "k": 1}] * 2) == codec.encode_many(
        [{"x": x, "k": 1}] * 2)
    if not isinstance(kept, codec.SparseArray):  # denser: an own copy, not a view
        assert kept.base is None
