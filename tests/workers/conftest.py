"""Fixtures of the worker tests: a store on the session's real Redis and models made in it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from app.learners.base import Learner
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import ModelKeys, Store

TENANT = "t"


def model_config(model_id: str = "m", **overrides: Any) -> ModelConfig:
    """A stored model config (as the API writes it): rcnbf, 6 features, 4 classes."""
    config: dict[str, Any] = {
        "model_id": model_id, "task": "label", "algorithm": "rcnbf", "n_features": 6,
        "n_classes": 4, "params": {"gamma": 0.1, "rho0": 0.1, "rho1": 0.2},
        "feedback": {"wait_seconds": 60, "on_timeout": "drop"}, "seed": 3,
        "uid": f"uid-{model_id}"}
    config.update(overrides)
    return ModelConfig.of(config)


async def create_model(store: Store, config: ModelConfig) -> ModelKeys:
    """Store a model with its initial snapshot, as ``POST /v1/models`` does."""
    learner = build_learner(config)
    rho0, rho1 = config.initial_noise_rates
    assert await store.models.create(TENANT, config, learner.get_state(), rho0, rho1)
    return ModelKeys(TENANT, config.model_id)


def decisions(config: ModelConfig, n: int, seed: int = 0
              ) -> tuple[list[tuple[str, dict[str, np.ndarray]]], np.ndarray]:
    """``n`` logged decisions of a fresh learner of ``config`` and a click per decision."""
    rng = np.random.default_rng(seed)
    learner: Learner = build_learner(config)
    X = rng.standard_normal((n, config.n_features))
    out = [(f"e{seed}-{i}", learner.decide(X[i]).context) for i in range(n)]
    clicks = (rng.random(n) < 0.5).astype(float)
    return out, clicks


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[Store]:
    s = Store.from_url(redis_url)
    await s.tenants.create(TENANT)
    yield s
    await s.close()


async def feed_clicks(store: Store, mk: ModelKeys, config: ModelConfig, n: int, rate: float,
                seed: int) -> list[dict[str, np.ndarray]]:
    """``n`` decisions answered with clicks of rate ``rate``; the joined events."""
    logged, _ = decisions(config, n, seed)
    clicks = (np.random.default_rng(seed).random(n) < rate).astype(float)
    await store.events.record_decisions(mk, logged, 60, 60)
    outcomes = await store.events.take_feedback_many(
        mk, [(eid, {"click": np.array(c)}) for (eid, _), c in zip(logged, clicks, strict=True)])
    assert all(o.status == "ok" for o in outcomes)
    return [{**ctx, "click": np.array(c)} for (_, ctx), c in zip(logged, clicks, strict=True)]
