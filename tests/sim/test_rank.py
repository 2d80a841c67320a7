"""The rank simulator: churn, first appearances, click model, oracle and random values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.sim.rank import RankSimulator, gap_closed


def test_churn_replaces_a_share_of_the_catalogue_with_new_items() -> None:
    sim = RankSimulator(n_items=200, churn=0.1, churn_every=50, seed=1)
    ids, items = sim.ids.copy(), sim.items.copy()
    for _ in range(51):
        sim.request()
    replaced = sim.ids != ids
    assert replaced.sum() == 20
    assert (sim.ids[replaced] >= 200).all()
    assert not np.isclose(sim.items[replaced], items[replaced]).all(axis=1).any()


def test_an_item_is_new_only_the_first_time_it_is_a_candidate() -> None:
    sim = RankSimulator(n_items=30, n_candidates=20, seed=2)
    first, second = sim.request(), sim.request()
    assert first.new.all()
    assert not second.new[np.isin(second.ids, first.ids)].any()
    assert second.new[~np.isin(second.ids, first.ids)].all()


def test_click_rates_follow_position_bias_relevance_and_noise() -> None:
    sim = RankSimulator(theta=(1.0, 0.5, 0.25), rho0=0.05, rho1=0.2, seed=3)
    request = sim.request()
    ranking = np.arange(3)
    n = 20_000
    rates = np.mean([sim.clicks(request, ranking) for _ in range(n)], axis=0)
    expected = 0.05 + 0.75 * sim.theta * request.relevance[ranking]
    assert np.all(np.abs(rates - expected) < 4 * np.sqrt(expected * (1 - expected) / n))


def test_oracle_and_random_values() -> None:
    sim = RankSimulator(n_candidates=5, seed=4)
    request = sim.request()
    played, oracle, random = sim.values(request, np.array([0, 1, 2]))
    rankings = list(itertools.permutations(range(5), 3))
    all_values = [sim.values(request, np.array(r))[0] for r in rankings]
    assert oracle == pytest.approx(max(all_values))
    assert random == pytest.approx(np.mean(all_values))
    assert gap_closed(np.array([oracle]), np.array([oracle]), np.array([random])) == 1.0
    assert played <= oracle


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="theta"):
        RankSimulator(theta=(1.0, 0.5))
    with pytest.raises(ValueError, match="slots"):
        RankSimulator(n_candidates=2)


def test_a_query_pool_repeats_each_query_with_its_candidates() -> None:
    sim = RankSimulator(n_items=200, churn=0.5, churn_every=10, queries=5, seed=5)
    seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for _ in range(60):
        request = sim.request()
        assert 0 <= request.query < 5
        x, ids = seen.setdefault(request.query, (request.x, request.ids))
        assert np.array_equal(request.x, x) and np.array_equal(request.ids, ids)
    assert len(seen) == 5
    assert (sim.ids == np.arange(200)).all()  # no churn


def test_without_a_pool_each_request_is_its_own_query() -> None:
    sim = RankSimulator(seed=6)
    assert [sim.request().query for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="queries"):
        RankSimulator(queries=0)
