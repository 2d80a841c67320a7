"""A configuration trained on a log that arrives in chunks (:class:`Training`) ends as it
does on the log in memory."""

from __future__ import annotations

import pickle
from itertools import pairwise

import numpy as np
import pytest

from app.evaluation.simulate import CONTEXTS, LABEL_LOGGING, K, simulate_label
from app.evaluation.training import Training, config_policy, start_training, train_size


@pytest.mark.parametrize("sizes", [(1050,), (170, 880), (99, 1, 100, 37, 813)])
def test_learn_in_chunks_ends_as_on_the_whole_log(sizes: tuple[int, ...]) -> None:
    log, _ = simulate_label(4, LABEL_LOGGING["softmax"], 1050)
    config = {"algorithm": "rcnbf"}  # its steps matter: chunks learned as steps differ
    whole = config_policy(config, "label", log, 0.5, rates=(0.05, 0.1))
    training = start_training(config, "label", CONTEXTS.shape[1], K, rates=(0.05, 0.1))
    ends = np.cumsum((0, *sizes))
    train = train_size(log.n, 0.5)
    for start, stop in pairwise(ends):
        if start < train:
            training.learn(log.rows(slice(start, min(stop, train))))
            training = pickle.loads(pickle.dumps(training))  # as a process pool returns it
    learner = training.finish()
    pi = np.array([learner.probabilities(x) for x in log.X[train:]])  # type: ignore[attr-defined]
    np.testing.assert_array_equal(pi, whole.pi)
    assert training.pending is None and whole.train == train == 525


def test_train_size_refuses_a_split_with_an_empty_part() -> None:
    with pytest.raises(ValueError, match="cannot be split"):
        train_size(1, 0.5)
    with pytest.raises(ValueError, match="train_fraction"):
        train_size(10, 1.0)
    assert isinstance(start_training({"algorithm": "linucb_diag"}, "label", 3, 2), Training)
