"""UMA (P4 Algorithm 2): unbiased update points, C = I reduces to the ultraconservative Perceptron,
row sums, selection, stopping, the confusion matrix in use, and learning from noisy labels."""

from __future__ import annotations

import numpy as np
import pytest

from app.learners.base import ParamError, stack_events
from app.learners.uma import (
    SELECTIONS,
    TAU_RULES,
    UMA,
    NoisyLabelPerceptron,
    membership,
    uma_iteration,
    update_points,
)
from app.sim.noisy_labels import circle, corrupt_labels, next_class_confusion, uniform_confusion

Q = 3


def _problem(n: int = 150, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    W_true = rng.standard_normal((Q, d))
    W = rng.standard_normal((Q, d))  # a current model that errs often
    return X, (X @ W_true.T).argmax(axis=1), W


def test_update_points_unbiased_for_true_class_mass_predicted_as_p() -> None:
    X, t, W = _problem()
    C = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.3], [0.1, 0.2, 0.6]])
    n = len(X)
    inside = membership(X @ W.T, 0.0)
    # mu[p, q] = (1/n) sum_i I{t_i = q} I{x_i in A_p} x_i  (Props. 1-2, given X)
    mu = np.stack([[(inside[:, p] & (t == q)) @ X / n for q in range(Q)] for p in range(Q)])
    rng = np.random.default_rng(1)
    R = 3000
    draws = np.stack([update_points(X, corrupt_labels(t, C, rng), W, C, 0.0) for _ in range(R)])
    se = draws.std(axis=0) / np.sqrt(R)
    assert np.all(np.abs(draws.mean(axis=0) - mu) <= 4 * se + 1e-12)
    assert np.abs(mu).max() > 10 * se.max()  # the test can fail: mu is far from 0


def _ultraconservative_perceptron_step(W: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Reference: the batch Perceptron direction z_pq = (1/n) sum_{y_i = q, pred_i = p} x_i of
    largest norm among mistakes, then w_q += z, w_p -= z (Crammer-Singer, perceptron steps)."""
    pred = (X @ W.T).argmax(axis=1)  # no ties in these tests
    best, best_norm = None, 0.0
    for p in range(Q):
        for q in range(Q):
            if p != q:
                z = X[(pred == p) & (y == q)].sum(axis=0) / len(X)
                if np.linalg.norm(z) > best_norm:
                    best, best_norm = (p, q, z), float(np.linalg.norm(z))
    assert best is not None
    p, q, z = best
    out = W.copy()
    out[q] += z
    out[p] -= z
    return out


def test_identity_confusion_is_the_ultraconservative_perceptron_on_z() -> None:
    X, t, W = _problem()
    W -= W.mean(axis=0)
    for _ in range(5):
        expected = _ultraconservative_perceptron_step(W, X, t)
        assert uma_iteration(W, X, t, np.eye(Q), alpha=0.0, selection="error",
                             tau_rule="perceptron_pq", eps=0.0,
                             rng=np.random.default_rng(0)) is not None
        np.testing.assert_allclose(W, expected, atol=1e-12)


def test_identity_confusion_converges_on_separable_data() -> None:
    X, t, _ = _problem(n=200)
    model = UMA(n_features=3, n_classes=Q)
    used = model.fit_batch(X, t, max_iter=2000)
    assert used < 2000  # stopped: no candidate pair left
    assert np.all((X @ model.W_.T).argmax(axis=1) == t)


@pytest.mark.parametrize("tau_rule", TAU_RULES)
@pytest.mark.parametrize("selection", SELECTIONS)
def test_rows_sum_to_zero_under_every_rule(selection: str, tau_rule: str) -> None:
    X, t, _ = _problem()
    C = uniform_confusion(Q, 0.2)
    model = UMA(n_features=3, n_classes=Q, confusion=C.tolist(), selection=selection,
                tau_rule=tau_rule, seed=3)
    model.fit_batch(X, corrupt_labels(t, C, np.random.default_rng(2)), max_iter=30)
    assert model.iterations_ > 0
    np.testing.assert_allclose(model.W_.sum(axis=0), 0.0, atol=1e-12)


def test_error_selection_updates_largest_candidate() -> None:
    X, t, W = _problem()
    W -= W.mean(axis=0)
    Z = update_points(X, t, W, np.eye(Q), 0.0)
    before = W.copy()
    p, q = uma_iteration(W, X, t, np.eye(Q), alpha=0.0, selection="error",
                         tau_rule="perceptron_pq", eps=0.0, rng=np.random.default_rng(0)) or (0, 0)
    norms = np.linalg.norm(Z, axis=2)
    np.fill_diagonal(norms, 0.0)
    assert norms[p, q] == norms.max()
    np.testing.assert_allclose(W[q] - before[q], Z[p, q])


def test_positive_alpha_never_leaves_zero() -> None:
    X, t, _ = _problem()
    model = UMA(n_features=3, n_classes=Q, alpha=0.1)
    assert model.fit_batch(X, t) == 0
    assert not model.W_.any()


def test_set_confusion_refuses_ill_conditioned_and_keeps_model() -> None:
    model = UMA(n_features=3, n_classes=Q, confusion=uniform_confusion(Q, 0.3).tolist())
    before = model.get_state()
    with pytest.raises(ParamError, match=r"ill-conditioned|singular"):
        model.set_confusion(uniform_confusion(Q, 2 / 3 - 1e-10))
    np.testing.assert_array_equal(model.confusion_, before["confusion_"])
    with pytest.raises(ParamError, match="confusion"):
        UMA(n_features=3, n_classes=Q, confusion=[[1.0, 0.0, 0.0]] * 3)


def test_gold_pairs_estimate_confusion_when_every_class_has_enough() -> None:
    C = next_class_confusion(Q, 0.3)
    model = UMA(n_features=2, n_classes=Q, gold_min_per_class=50, chunk=10)
    rng = np.random.default_rng(4)
    true = np.repeat(np.arange(Q), 200)
    rng.shuffle(true)
    noisy = corrupt_labels(true, C, rng)
    for k, (y, label) in enumerate(zip(true, noisy, strict=True)):
        model.learn_one({"x": np.array([1.0, 0.0]), "label": label, "gold": 1, "true_label": y})
        if k == 60:
            assert model.confusion_source == "identity"  # some class has < 50 gold pairs
    assert model.confusion_source == "gold"
    assert np.abs(model.confusion_ - C).max() < 4 * np.sqrt(0.25 / 200)
    model.set_confusion(C)
    assert model.confusion_source == "given"
    model.set_confusion(None)
    assert model.confusion_source == "gold"


def test_step_waits_for_a_full_chunk_without_auto_step() -> None:
    model = UMA(n_features=2, n_classes=Q, chunk=5, auto_step=False)
    for k in range(5):
        assert not model.step_due
        model.learn_one({"x": np.array([1.0, 0.0]), "label": k % Q, "gold": 0,
                         "true_label": -1})
    assert model.step_due and not model.W_.any()
    model.step()
    assert not model.step_due and model.W_.any()


def test_uma_with_true_confusion_beats_perceptron_on_noisy_labels() -> None:
    rng = np.random.default_rng(5)
    X, t, _ = circle(4000, rng, n_classes=4, margin=0.05)
    C = next_class_confusion(4, 0.35)
    noisy = corrupt_labels(t, C, rng)
    errors = {}
    for name, model in (("uma", UMA(n_features=2, n_classes=4, confusion=C.tolist())),
                        ("perceptron", NoisyLabelPerceptron(n_features=2, n_classes=4))):
        wrong = 0
        for x, y, truth in zip(X, noisy, t, strict=True):
            decision = model.decide(x)
            wrong += decision.output["label"] != truth
            model.learn_one({**decision.context, "label": y, "gold": 0, "true_label": -1})
        errors[name] = wrong / len(X)
    # Perceptron's online error against a 35% structured noise stays far above UMA's.
    assert errors["uma"] + 0.1 < errors["perceptron"], errors


def _rings(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Three concentric rings of equal width in the unit disc, radius uniform: equal class sizes."""
    radius, angle = rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 2 * np.pi, n)
    t = np.minimum((radius * Q).astype(int), Q - 1)
    return np.c_[radius * np.cos(angle), radius * np.sin(angle)], t


def test_kernel_uma_learns_rings_that_linear_uma_cannot() -> None:
    rng = np.random.default_rng(6)
    X, t = _rings(2000, rng)
    C = uniform_confusion(Q, 0.3)
    noisy = corrupt_labels(t, C, rng)
    X_test, t_test = _rings(2000, np.random.default_rng(7))
    errors = {}
    variants = (("linear", {}), ("kernel", {"kernel": "gaussian:0.1", "n_components": 100}))
    for name, params in variants:
        model = UMA(n_features=2, n_classes=Q, confusion=C.tolist(), seed=0, **params)
        for x, y in zip(X, noisy, strict=True):
            model.learn_one({"x": x, "label": y, "gold": 0, "true_label": -1})
        errors[name] = float(np.mean([model.decide(x).output["label"] != q
                                      for x, q in zip(X_test, t_test, strict=True)]))
    # Without a bias, a linear rule predicts from the angle alone, which is independent of the
    # ring: its expected error is >= 2/3 (s.e. 0.011 on 2,000 test points).  Kernel UMA
    # measured 0.05-0.09 on seeds 0-2 of this problem: 0.25 leaves a wide margin.
    assert errors["linear"] > 0.6, errors
    assert errors["kernel"] < 0.25, errors


def _kernel_uma(seed: int | None) -> UMA:
    return UMA(n_features=3, n_classes=Q, seed=seed, kernel="gaussian:0.5", n_components=16,
               confusion=uniform_confusion(Q, 0.2).tolist(), chunk=10)


def _kernel_events(n: int = 60) -> list[dict[str, object]]:
    X, t, _ = _problem(n=n)
    return [{"x": x, "label": y, "gold": 0, "true_label": -1} for x, y in zip(X, t, strict=True)]


def test_kernel_state_round_trips_with_the_random_map() -> None:
    model = _kernel_uma(seed=None)
    for event in _kernel_events():
        model.learn_one(event)
    state = model.get_state()
    assert state["omega_"].shape == (3, 16) and state["W_"].shape == (Q, 16)
    fresh = _kernel_uma(seed=99)
    fresh.set_state(state)
    X, _, _ = _problem(n=20, seed=8)
    assert [fresh.decide(x).output for x in X] == [model.decide(x).output for x in X]
    assert model.W_.any()


def test_kernel_same_seed_and_learn_many_give_same_state() -> None:
    events = _kernel_events()
    a, b, batched = _kernel_uma(4), _kernel_uma(4), _kernel_uma(4)
    for event in events:
        a.learn_one(event)
        b.learn_one(event)
    batched.learn_many(stack_events(events))
    for name, value in a.get_state().items():
        np.testing.assert_array_equal(b.get_state()[name], value, err_msg=name)
        np.testing.assert_array_equal(batched.get_state()[name], value, err_msg=name)
    assert not np.array_equal(_kernel_uma(5).omega_, a.omega_)


@pytest.mark.parametrize("kernel", ["poly:2", "gaussian:0", "rbf:1"])
def test_kernel_refuses_unsupported_specs(kernel: str) -> None:
    with pytest.raises(ParamError, match="kernel"):
        UMA(n_features=2, n_classes=Q, kernel=kernel)
    with pytest.raises(ParamError, match="n_components"):
        UMA(n_features=2, n_classes=Q, kernel="gaussian:1", n_components=0)
