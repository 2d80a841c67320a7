"""Numeric tests of KernelOGD and its estimators (P5 Algorithm 1, Sections 3.2-3.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.kernel_ogd import KernelOGD
from app.learners.kernels.estimators import MapEstimate, TaylorEstimator, prod, prod_point
from app.learners.kernels.functions import Kernel, make_loss, parse_kernel
from app.learners.kernels.support import FeatureStore

X_A = np.array([0.3, -0.2, 0.1])
X_B = np.array([0.1, 0.4, -0.3])
NOISE = 0.2
KERNELS = ["linear", "poly:3", "exp", "gaussian:1.5"]


def _estimator(kernel: str, loss: str = "exp", p: float = 2.0, **kw: bool) -> TaylorEstimator:
    return TaylorEstimator(parse_kernel(kernel), make_loss(loss), p, 30, **kw)


def _noisy_map(est: TaylorEstimator, x: np.ndarray, rng: np.random.Generator) -> MapEstimate:
    orders = np.array([est.draw_order(rng) for _ in range(est.kernel.orders_per_map)])
    q = est.kernel.map_queries(orders)
    return est.map_estimate(orders, x + NOISE * rng.standard_normal((q, x.size)))


def _assert_mean(samples: list[float], expected: float, n_se: float = 4.0) -> None:
    arr = np.asarray(samples)
    se = arr.std(ddof=1) / math.sqrt(arr.size)
    assert abs(arr.mean() - expected) < n_se * se, (arr.mean(), expected, se)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_prod_point_is_unbiased_for_kernel_under_noise(kernel: str) -> None:
    est, rng = _estimator(kernel), np.random.default_rng(1)
    samples = [prod_point(_noisy_map(est, X_A, rng), X_B, est.kernel) for _ in range(20000)]
    _assert_mean(samples, float(est.kernel(X_A[None], X_B)[0]))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_prod_between_estimates_is_unbiased_for_kernel_under_noise(kernel: str) -> None:
    est, rng = _estimator(kernel), np.random.default_rng(2)
    samples = [prod(_noisy_map(est, X_A, rng), _noisy_map(est, X_B, rng)) for _ in range(20000)]
    _assert_mean(samples, float(est.kernel(X_A[None], X_B)[0]))


@pytest.mark.parametrize("kernel", KERNELS)
def test_prod_point_series_equals_kernel_without_noise(kernel: str) -> None:
    """Exact expectation: sum over the order distribution of noise-free estimates."""
    est = _estimator(kernel)
    k = est.kernel
    total = 0.0
    if k.gaussian:
        for n1 in range(30):
            for n2 in range(30):
                copies = np.vstack([np.tile(X_A, (2 * n1 + n2, 1))])
                e = est.map_estimate(np.array([n1, n2]), copies)
                total += math.exp(-est.log_weight(n1) - est.log_weight(n2)) * prod_point(e, X_B, k)
    else:
        for n in range(30):
            e = est.map_estimate(np.array([n]), np.tile(X_A, (n, 1)))
            total += math.exp(-est.log_weight(n)) * prod_point(e, X_B, k)
    assert total == pytest.approx(float(k(X_A[None], X_B)[0]), rel=1e-9)


def test_gaussian_feature_coefficient_has_the_square_root() -> None:
    """Gaussian features (P5 Appendix B): c_n = sqrt((2/s2)^n/n!); P5's (2/s2)^n/n! does not
    give the kernel."""
    k = Kernel("gaussian", sigma2=1.5)
    assert math.exp(2 * k.log_level_coef(3)) == pytest.approx((2 / 1.5) ** 3 / 6)


def test_prod_is_symmetric_and_nonnegative_on_itself() -> None:
    est, rng = _estimator("gaussian:1.5"), np.random.default_rng(3)
    for _ in range(200):
        a, b = _noisy_map(est, X_A, rng), _noisy_map(est, X_B, rng)
        assert prod(a, b) == pytest.approx(prod(b, a), rel=1e-12)
        assert prod(a, a) >= 0.0


@pytest.mark.parametrize(("kernel", "factor"), [("exp", 1.0), ("gaussian:1.5", 3.0)])
@pytest.mark.parametrize("p", [1.5, 2.0, 4.0])
def test_mean_queries_per_round_match_paper(kernel: str, factor: float, p: float) -> None:
    """P5: p/(p-1)^2 queries per round (dot-product), 3p/(p-1)^2 (Gaussian)."""
    est, rng = _estimator(kernel, p=p), np.random.default_rng(4)
    queries = [est.plan_queries(est.draw_plan(rng)) for _ in range(20000)]
    _assert_mean(queries, factor * p / (p - 1) ** 2)


def test_order_tail_is_geometric() -> None:
    est, rng = _estimator("exp", p=2.0), np.random.default_rng(5)
    orders = np.array([est.draw_order(rng) for _ in range(40000)])
    for z in (1, 2, 3):
        frac = float(np.mean(orders >= z))
        expected = 2.0 ** -z
        assert abs(frac - expected) < 4 * math.sqrt(expected * (1 - expected) / orders.size)


def _store_with_terms(kernel: str, rng: np.random.Generator) -> FeatureStore:
    store = FeatureStore(parse_kernel(kernel), 3, budget=50, max_order=30, explicit_dim=3,
                         eviction="smallest")
    est = _estimator(kernel)
    for _ in range(20):
        store.add(float(rng.normal(scale=0.3)), _noisy_map(est, rng.normal(size=3) * 0.5, rng))
    return store


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "loss", "target", "fixed"), [
    ("exp", "exp", -1.0, False),            # y = -1 catches P5's sign slip (Subroutine 1)
    ("gaussian:1.5", "exp", -1.0, False),
    ("gaussian:1.5", "smooth_hinge", 1.0, False),
    ("poly:2", "smooth_abs", 0.4, False),
    ("gaussian:1.5", "squared", 0.4, False),
    ("gaussian:1.5", "squared", 0.4, True),  # fixed order for the polynomial l'
])
def test_gradient_length_is_unbiased(kernel: str, loss: str, target: float, fixed: bool) -> None:
    rng = np.random.default_rng(6)
    store = _store_with_terms(kernel, rng)
    est = _estimator(kernel, loss, fixed_order=fixed)
    f = store.value(X_A)
    lo = est.loss
    expected = (target * lo.derivative(target * f) if lo.classification
                else lo.derivative(f - target))
    samples = []
    for _ in range(12000):
        plan = est.draw_plan(rng)
        pool = X_A + NOISE * rng.standard_normal((max(est.plan_queries(plan), 1), 3))
        g, _ = est.estimate(plan, pool, target, store.inner)
        samples.append(g)
    _assert_mean(samples, expected)


@pytest.mark.slow
def test_two_copy_update_matches_clean_ogd_in_expectation() -> None:
    """P5 footnote 2 (two copies): E[w+] = w - eta 2 (<w, x> - y) x, plain OGD on the clean
    point."""
    rng = np.random.default_rng(7)
    model = KernelOGD(n_features=3, seed=0, kernel="linear", eta=0.1, norm_bound=1e6,
                      explicit_dim=3, budget=1)
    model.set_state({**model.get_state(), "tensor_": np.array([0.0, 0.5, -0.3, 0.2]),
                     "norm2_": np.array([0.38])})
    state = model.get_state()
    w, x, y = state["tensor_"][1:4], X_A, 0.7
    updates = []
    for _ in range(10000):
        model.set_state(state)
        d = model.decide(x + rng.standard_normal(3))
        assert model.copies_needed(d.context) == 1
        model.learn_one({**d.context, "target": y, "copies": x + rng.standard_normal((1, 3))})
        updates.append(model.get_state()["tensor_"][1:4])
    expected = w - 0.1 * 2 * (w @ x - y) * x
    for j in range(3):
        _assert_mean([u[j] for u in updates], float(expected[j]))


@pytest.mark.slow
def test_naive_single_copy_attenuates_but_unbiased_does_not() -> None:
    """P5 Section 4.3 (one copy is not enough): naive OGD on one noisy copy converges toward
    w/(1 + sigma^2)."""
    rng = np.random.default_rng(8)
    w_true = np.array([1.0, -1.0])
    models = {naive: KernelOGD(n_features=2, seed=1, kernel="linear", eta=0.004, naive=naive)
              for naive in (False, True)}
    for _ in range(3000):
        x = rng.standard_normal(2)
        for model in models.values():
            d = model.decide(x + rng.standard_normal(2))
            copies = x + rng.standard_normal((model.copies_needed(d.context), 2))
            model.learn_one({**d.context, "target": float(w_true @ x), "copies": copies})
    unbiased = models[False].get_state()["tensor_"][1:3]
    naive = models[True].get_state()["tensor_"][1:3]
    assert np.allclose(naive, w_true / 2, atol=0.15)
    assert np.allclose(unbiased, w_true, atol=0.25)


@pytest.mark.parametrize("explicit_dim", [0, 9])
@pytest.mark.parametrize("eviction", ["smallest", "oldest"])
def test_incremental_norm_and_projection_are_exact(explicit_dim: int, eviction: str) -> None:
    model = KernelOGD(n_features=3, seed=2, kernel="gaussian:1.5", eta=0.5, norm_bound=2.0,
                      budget=15, eviction=eviction, explicit_dim=explicit_dim)
    rng = np.random.default_rng(9)
    for _ in range(150):
        x = rng.normal(size=3) * 0.5
        d = model.decide(x + NOISE * rng.standard_normal(3))
        copies = x + NOISE * rng.standard_normal((model.copies_needed(d.context), 3))
        model.learn_one({**d.context, "target": float(np.sin(3 * x[0])), "copies": copies})
    store = model._store
    assert store.norm2 == pytest.approx(store.exact_norm2(), rel=1e-8, abs=1e-10)
    assert store.norm2 <= 2.0 * (1 + 1e-9)
    assert model.support_terms() <= 15


def test_explicit_levels_give_the_same_function_as_the_list() -> None:
    kw = {"n_features": 3, "seed": 4, "kernel": "exp", "loss": "smooth_abs", "eta": 0.2,
          "budget": 400}
    exact, listed = KernelOGD(explicit_dim=27, **kw), KernelOGD(explicit_dim=0, **kw)
    rng = np.random.default_rng(10)
    for _ in range(100):
        x = rng.normal(size=3) * 0.5
        noisy, more = x + NOISE * rng.standard_normal(3), x + NOISE * rng.standard_normal((60, 3))
        for model in (exact, listed):
            d = model.decide(noisy)
            model.learn_one({**d.context, "target": float(x.sum()), "copies": more})
    for x in rng.normal(size=(5, 3)):
        assert exact.predict(x) == pytest.approx(listed.predict(x), rel=1e-9, abs=1e-12)


def test_learn_refuses_too_few_copies_and_says_how_many() -> None:
    model = KernelOGD(n_features=3, seed=0, kernel="linear")
    d = model.decide(X_A)
    with pytest.raises(ParamError, match="more_copies: 1"):
        model.learn_one({**d.context, "target": 0.0, "copies": np.zeros((0, 3))})


def test_learn_refuses_a_non_exploring_decision() -> None:
    model = KernelOGD(n_features=3, seed=0)
    d = model.decide(X_A, explore=False)
    assert d.output["copies_needed"] == 0
    with pytest.raises(ParamError, match="explore=False"):
        model.learn_one({**d.context, "target": 0.0, "copies": np.zeros((5, 3))})


def test_classification_loss_refuses_real_targets() -> None:
    model = KernelOGD(n_features=3, seed=0, loss="exp")
    d = model.decide(X_A)
    copies = np.tile(X_A, (model.copies_needed(d.context), 1))
    with pytest.raises(ParamError, match="target"):
        model.learn_one({**d.context, "target": 0.5, "copies": copies})


@pytest.mark.parametrize(("params", "field"), [
    ({"kernel": "poly:0"}, "kernel"), ({"kernel": "gaussian:-1"}, "kernel"),
    ({"kernel": "rbf"}, "kernel"), ({"loss": "logistic"}, "loss"), ({"p": 1.0}, "p"),
    ({"estimator": "two_copy", "kernel": "exp"}, "estimator"), ({"eviction": "lru"}, "eviction"),
])
def test_construction_refuses_invalid_params(params: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError, match=field):
        KernelOGD(n_features=3, **params)  # type: ignore[arg-type]
