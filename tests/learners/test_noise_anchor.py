"""The anchor estimator of click-noise rates: consistency, interval coverage, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.learners.base import ParamError
from app.learners.noise_anchor import (
    ANCHOR_UNCHECKED,
    INTERVAL_TOO_WIDE,
    NO_EXPLORATION,
    TOO_FEW_EVENTS,
    ProgressiveScorer,
    estimate_from_anchors,
    top_set,
)


def epsilon_greedy_plays(n: int, K: int, eps: float, accuracy: float, rho: tuple[float, float],
                         seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(prob, score, click)`` of an epsilon-greedy policy whose greedy label is right
    with probability ``accuracy``, scored by an oracle that knows which plays are right
    (score 1 + noise for a right play, noise for a wrong one)."""
    rng = np.random.default_rng(seed)
    greedy_right = rng.random(n) < accuracy
    explore = rng.random(n) < eps
    # An explored draw equals the greedy label with probability 1/K.
    on_greedy = ~explore | (rng.random(n) < 1.0 / K)
    # Off the greedy label, the play is right only if the greedy one is wrong and the
    # draw hits the true label among the K - 1 others.
    right = np.where(on_greedy, greedy_right,
                     ~greedy_right & (rng.random(n) < 1.0 / (K - 1)))
    prob = np.where(on_greedy, 1.0 - eps + eps / K, eps / K)
    flip = rng.random(n) < np.where(right, rho[1], rho[0])
    click = np.where(flip, ~right, right).astype(float)
    score = right + 0.3 * rng.random(n)
    return prob, score, click


@pytest.mark.parametrize("rho", [(0.2, 0.4), (0.1, 0.3), (0.3, 0.1), (0.0, 0.0)])
def test_estimate_is_consistent_where_the_truth_is_known(rho: tuple[float, float]) -> None:
    """Mean over 10 seeds within 4 standard errors (of the mean) of the truth, and each
    seed's estimate within 5 of its own reported standard errors."""
    K, z = 9, 1.959963984540054  # the default level, 0.95
    est = [estimate_from_anchors(*epsilon_greedy_plays(40_000, K, 0.05, 0.7, rho, seed), K)
           for seed in range(10)]
    for i, rate in enumerate(("rho0", "rho1")):
        values = np.array([getattr(e, rate) for e in est])
        se = np.array([(getattr(e, f"{rate}_interval")[1] - getattr(e, f"{rate}_interval")[0])
                       / (2 * z) for e in est])
        assert np.all(np.abs(values - rho[i]) <= 5 * np.maximum(se, 1e-3))
        assert abs(values.mean() - rho[i]) <= 4 * se.mean() / math.sqrt(len(est)) + 1e-3
    # the anchors hold: never refused as failing; the agreement of the bottom anchor, which
    # must be shown within its tolerance, holds some back (3 of 10 at (0.2, 0.4))
    assert all(e.published or e.reason == ANCHOR_UNCHECKED for e in est), est
    assert sum(e.published for e in est) >= 6


def test_interval_coverage_over_seeds() -> None:
    """The 90% intervals hold each rate in 40 seeds at least 30 times: with true
    coverage 0.9 the count is Binomial(40, 0.9), below 31 with probability < 0.01."""
    K, rho = 10, (0.2, 0.4)
    held = np.zeros(2, dtype=int)
    for seed in range(40):
        e = estimate_from_anchors(*epsilon_greedy_plays(20_000, K, 0.05, 0.8, rho, 100 + seed),
                                  K, level=0.9)
        held += [e.rho0_interval[0] <= rho[0] <= e.rho0_interval[1],
                 e.rho1_interval[0] <= rho[1] <= e.rho1_interval[1]]
    assert np.all(held >= 31), held


def test_interval_width_shrinks_like_one_over_root_n() -> None:
    K, rho = 9, (0.2, 0.4)
    small = estimate_from_anchors(*epsilon_greedy_plays(10_000, K, 0.05, 0.7, rho, 1), K)
    large = estimate_from_anchors(*epsilon_greedy_plays(40_000, K, 0.05, 0.7, rho, 1), K)
    for a, b in zip(small.widths, large.widths, strict=True):
        assert b == pytest.approx(a / 2, rel=0.2)


def test_few_events_give_insufficient_data_not_a_number_to_use() -> None:
    K = 9
    est = estimate_from_anchors(*epsilon_greedy_plays(3_000, K, 0.05, 0.7, (0.2, 0.4), 2), K)
    assert est.insufficient_data and not est.published
    assert est.reason in (TOO_FEW_EVENTS, INTERVAL_TOO_WIDE)
    assert est.n_events == 3_000 and est.n_top == 90  # 5% of the newest 60%
    wide = estimate_from_anchors(*epsilon_greedy_plays(20_000, K, 0.05, 0.7, (0.2, 0.4), 2), K,
                                 max_width=0.01)
    assert wide.reason == INTERVAL_TOO_WIDE and wide.insufficient_data


def test_a_deterministic_policy_has_no_uniform_anchor() -> None:
    """Without exploration the mean weight is 1/K: refused, however many events."""
    K = 9
    prob, score, click = epsilon_greedy_plays(20_000, K, 0.05, 0.7, (0.2, 0.4), 3)
    est = estimate_from_anchors(np.ones_like(prob), score, click, K)
    assert est.reason == NO_EXPLORATION and est.insufficient_data
    assert est.support == pytest.approx(1 / K)


def test_estimates_are_sanitised_and_flagged() -> None:
    """Rates summing past 1 - beta_min are scaled down, and the reason says so."""
    K = 5
    prob, score, click = epsilon_greedy_plays(40_000, K, 0.1, 0.7, (0.45, 0.5), 4)
    est = estimate_from_anchors(prob, score, click, K, max_width=1.0, agree_tolerance=1.0)
    assert est.reason == "clipped" and est.published
    assert 1 - est.rho0 - est.rho1 >= 0.1 - 1e-12
    assert est.raw_rho0 + est.raw_rho1 > est.rho0 + est.rho1


def test_top_set_skips_unscored_plays_and_breaks_ties_by_order() -> None:
    score = np.array([np.nan, 0.5, 0.9, 0.9, 0.1])
    assert top_set(score, 0.25).tolist() == [2]
    assert top_set(score, 0.5).tolist() == [2, 3]
    assert top_set(np.full(3, np.nan), 0.5).size == 0


@pytest.mark.parametrize("bad", [
    {"prob": np.zeros(4)}, {"click": np.full(4, 0.5)}, {"score": np.full(4, np.inf)},
    {"prob": np.ones(3)},
])
def test_refuses_bad_columns(bad: dict[str, np.ndarray]) -> None:
    cols = {"prob": np.ones(4), "score": np.zeros(4), "click": np.ones(4)} | bad
    with pytest.raises(ParamError):
        estimate_from_anchors(cols["prob"], cols["score"], cols["click"], 3)


@pytest.mark.parametrize("params", [{"top_fraction": 0.0}, {"level": 1.0},
                                    {"max_width": 0.0}, {"min_events": 0},
                                    {"beta_min": 1.0}])
def test_refuses_bad_settings(params: dict[str, float]) -> None:
    with pytest.raises(ParamError, match=next(iter(params))):
        estimate_from_anchors(np.ones(4), np.zeros(4), np.ones(4), 3, **params)  # type: ignore[arg-type]


def test_progressive_scores_are_out_of_sample_and_rank_right_plays_first() -> None:
    """A block is scored before it is learned (changing its clicks leaves its scores);
    after burn-in the scorer puts right plays of a separable stream on top."""
    rng = np.random.default_rng(5)
    K, d, n = 4, 8, 4_000
    protos = np.eye(K, d)
    y = rng.integers(K, size=n)
    X = protos[y] + 0.1 * rng.random((n, d))
    played = rng.integers(K, size=n)
    click = (played == y).astype(float)
    a = ProgressiveScorer(d, K, burn_in=500)
    b = ProgressiveScorer(d, K, burn_in=500)
    scores = np.concatenate([a.score_and_learn(X[i:i + 500], played[i:i + 500], click[i:i + 500])
                             for i in range(0, n, 500)])
    for i in range(0, n - 500, 500):
        b.score_and_learn(X[i:i + 500], played[i:i + 500], click[i:i + 500])
    flipped = b.score_and_learn(X[-500:], played[-500:], 1.0 - click[-500:])
    np.testing.assert_array_equal(flipped, scores[-500:])
    assert np.all(np.isnan(scores[:500])) and not np.any(np.isnan(scores[500:]))
    top = top_set(scores, 0.1)
    assert (played[top] == y[top]).mean() > 0.98
    assert a.learned == n


def test_scorer_skips_plays_that_would_make_its_state_non_finite() -> None:
    """Plays whose squared inputs overflow are left unlearned and score NaN; the state stays
    finite and the play between them is learned and scored."""
    scorer = ProgressiveScorer(4, 3, burn_in=0)
    scorer.score_and_learn(np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([1]), np.array([1.0]))
    X = np.array([[1e200, 0.0, 0.0, 1.0], [0.5, 0.0, 0.0, 0.0], [0.0, -1e200, 0.0, 0.0]])
    before = scorer.model.get_state()
    scores = scorer.score_and_learn(X, np.array([0, 1, 2]), np.array([0.0, 1.0, 1.0]))
    assert np.isnan(scores[[0, 2]]).all() and np.isfinite(scores[1])
    assert scorer.learned == 2
    state = scorer.model.get_state()
    assert all(np.isfinite(arr).all() for arr in state.values())
    np.testing.assert_array_equal(state["weights_"][[0, 2]], before["weights_"][[0, 2]])
    assert not np.array_equal(state["weights_"][1], before["weights_"][1])


def _uniform_plays(rng: np.random.Generator, n: int, k: int, rho0: float, rho1: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uniform plays over ``k`` labels, a scorer that knows which are right, noisy clicks."""
    right = rng.random(n) < 1 / k
    click = np.where(right, rng.random(n) > rho1, rng.random(n) < rho0).astype(float)
    return np.full(n, 1 / k), right + rng.random(n), click


def test_a_half_life_follows_a_change_of_the_rates() -> None:
    rng = np.random.default_rng(21)
    before = _uniform_plays(rng, 30_000, 4, 0.2, 0.3)
    after = _uniform_plays(rng, 20_000, 4, 0.05, 0.1)
    prob, score, click = (np.r_[b, a] for b, a in zip(before, after, strict=True))
    alike = estimate_from_anchors(prob, score, click, 4)
    recent = estimate_from_anchors(prob, score, click, 4, half_life=5_000)
    # every play alike: 60% of the weight on the old rates, far outside the interval
    assert alike.rho0 > 0.1 and not alike.rho0_interval[0] <= 0.05 <= alike.rho0_interval[1]
    # 20,000 plays are 4 half-lives: the old rates keep 6% of the weight
    assert recent.published
    assert recent.rho0_interval[0] <= 0.05 <= recent.rho0_interval[1]
    assert recent.rho1_interval[0] <= 0.1 <= recent.rho1_interval[1]


def test_a_half_life_beyond_the_plays_barely_changes_the_estimate() -> None:
    prob, score, click = _uniform_plays(np.random.default_rng(22), 20_000, 4, 0.2, 0.3)
    alike = estimate_from_anchors(prob, score, click, 4)
    far = estimate_from_anchors(prob, score, click, 4, half_life=1e9)
    assert abs(far.rho0 - alike.rho0) < 1e-4 and abs(far.rho1 - alike.rho1) < 1e-4
    assert abs(far.widths[0] - alike.widths[0]) < 1e-4
