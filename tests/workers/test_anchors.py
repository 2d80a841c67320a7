"""The anchor estimator in the workers against a real Redis: the trainer scores every observed
play of a model whose learner uses noise rates, the jobs role publishes rates only when their
intervals are narrow enough and says ``insufficient_data`` before."""

from __future__ import annotations

import numpy as np

from app.learners.noise_publish import ANCHOR_EVERY
from app.store import ModelKeys, Store
from app.store.nrest import AnchorStore
from app.worker_settings import WorkerSettings
from tests.workers.conftest import create_model, decisions, model_config
from workers.worker import Worker

RATES = (0.2, 0.3)


async def test_the_trainer_keeps_an_anchor_row_per_observed_play_of_models_that_use_rates(
        store: Store) -> None:
    configs = [model_config("ridge", algorithm="linucb_diag", params={}),
               model_config("plain", algorithm="banditron", params={"gamma": 0.1})]
    keys = [await create_model(store, config) for config in configs]
    clicks = {}
    for mk, config in zip(keys, configs, strict=True):
        logged, clicks[mk.model] = decisions(config, 60)
        await store.events.record_decisions(mk, logged, 60, 60)
        await store.events.take_feedback_many(
            mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(
                logged, clicks[mk.model], strict=True)])
    settings = WorkerSettings(roles=("trainer",), worker_id="t", nrest_threads=True)
    assert await Worker(store, settings).drain() == 120
    anchors = AnchorStore(store.redis)
    rows = await anchors.load(keys[0], 1000)
    assert rows is not None and len(rows) == 60
    np.testing.assert_array_equal(rows.click, clicks["ridge"])
    assert np.all((rows.prob > 0) & (rows.prob <= 1))
    assert np.all(np.isnan(rows.score))  # the scorer's burn-in: too early to rank plays
    state = await anchors.scorer_state(keys[0])
    assert state is not None and int(state["count_"]) == 60
    assert await anchors.new_counts(keys) == [60, 0]
    assert await anchors.load(keys[1], 1000) is None


def _plays(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A uniform policy over 4 labels, a scorer that knows the right plays, rates RATES."""
    rng = np.random.default_rng(seed)
    right = rng.random(n) < 0.25
    click = np.where(right, rng.random(n) > RATES[1], rng.random(n) < RATES[0])
    return np.full(n, 0.25), right + rng.random(n), click.astype(float)


async def _estimate(store: Store, mk: ModelKeys, n: int) -> None:
    anchors = AnchorStore(store.redis)
    await anchors.state_one_right_label(mk, True)  # the plays have one right label each
    await anchors.append(mk, *_plays(n, seed=len(mk.model)), {}, cap=50_000)
    settings = WorkerSettings(roles=("jobs",), worker_id="n", nrest_threads=True)
    await Worker(store, settings).drain()


async def test_an_estimate_is_published_only_when_its_interval_is_narrow(store: Store) -> None:
    config = model_config("few", algorithm="linucb_diag", params={})
    few = await create_model(store, config)
    await _estimate(store, few, ANCHOR_EVERY)
    noise = await store.noise.get(few)
    assert noise is not None and (noise.rho0, noise.rho1, noise.source) == (0.0, 0.0, "initial")
    last = (await AnchorStore(store.redis).settings(few)).last
    assert last is not None and last["status"] == "insufficient_data"
    # 2,500 plays: 63 in the top set (5% of the recent half), fewer than the 100 required
    assert last["reason"] == "too_few_events" and last["n_events"] == ANCHOR_EVERY
    assert last["interval"]["rho0"] is None

    many = await create_model(store, model_config("many", algorithm="linucb_diag", params={}))
    await _estimate(store, many, 40_000)
    noise = await store.noise.get(many)
    assert noise is not None and noise.source == "estimated" and noise.n_samples == 40_000
    assert abs(noise.rho0 - RATES[0]) < 0.05 and abs(noise.rho1 - RATES[1]) < 0.05
    last = (await AnchorStore(store.redis).settings(many)).last
    assert last is not None and last["status"] == "published"
    for rate, truth in zip(("rho0", "rho1"), RATES, strict=True):
        low, high = last["interval"][rate]
        assert high - low <= 0.1 and low < truth < high


async def test_configured_rates_and_the_fixed_estimator_are_left_alone(store: Store) -> None:
    configured = await create_model(store, model_config("conf", algorithm="linucb_diag",
                                                        params={}))
    await store.noise.put(configured, 0.05, 0.05, source="configured")
    fixed = await create_model(store, model_config("fixed", algorithm="linucb_diag", params={}))
    await AnchorStore(store.redis).configure(fixed, estimator="fixed")
    for mk in (configured, fixed):
        await _estimate(store, mk, 40_000)
        noise = await store.noise.get(mk)
        assert noise is not None and noise.source != "estimated"
