"""A model measurably learns from simulated noisy clicks sent through the API (SynSep, RCNBF)."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.datasets import load_classification
from app.sim.feedback import noisy_clicks
from tests.api.conftest import TestClient, new_model

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

RHO0, RHO1 = 0.1, 0.2
ROUNDS, BATCH, HELD_OUT = 4000, 500, 1000


def _sparse(X: np.ndarray) -> list[dict]:
    return [{"indices": np.flatnonzero(x).tolist(), "values": x[x != 0].tolist()} for x in X]


def _greedy_error(client: TestClient, auth: dict[str, str], X: np.ndarray, y: np.ndarray) -> float:
    r = client.post("/v1/models/syn/predict", json={"instances": _sparse(X), "explore": False},
                    headers=auth)
    labels = np.array([p["label"] for p in r.json()["predictions"]])
    return float(np.mean(labels != y))


def test_rcnbf_learns_synsep_from_noisy_clicks(client: TestClient,
                                               tenant: dict[str, str]) -> None:
    X, y = load_classification("synsep", n=ROUNDS + HELD_OUT, seed=0)
    Xt, yt = X[ROUNDS:], y[ROUNDS:]
    new_model(client, tenant, model_id="syn", algorithm="rcnbf", n_features=400, n_classes=9,
              params={"rho0": RHO0, "rho1": RHO1})
    before = _greedy_error(client, tenant, Xt, yt)
    rng = np.random.default_rng(1)
    true_clicks = []
    for start in range(0, ROUNDS, BATCH):
        sl = slice(start, start + BATCH)
        preds = client.post("/v1/models/syn/predict", json={"instances": _sparse(X[sl])},
                            headers=tenant).json()["predictions"]
        played = np.array([p["label"] for p in preds])
        truth = (played == y[sl]).astype(float)
        true_clicks.append(truth)
        clicks = noisy_clicks(truth, RHO0, RHO1, rng)
        events = [{"event_id": p["event_id"], "click": bool(c)}
                  for p, c in zip(preds, clicks, strict=True)]
        r = client.post("/v1/models/syn/feedback", json={"events": events}, headers=tenant)
        assert r.json() == {"accepted": BATCH, "rejected": []}
        assert client.post("/v1/models/syn/sync", headers=tenant).status_code == 200
    after = _greedy_error(client, tenant, Xt, yt)
    # untrained weights always pick label 0: error ~ 8/9; the trained model must be far below
    # (SE of an error rate on 1000 points <= 0.016; the margin is > 10 SE)
    assert before > 0.8
    assert after < 0.7, (before, after)
    stats = client.get("/v1/models/syn", headers=tenant).json()["stats"]
    assert stats["events_applied"] == ROUNDS
    # debiased reward is an unbiased estimate of the true click rate: |h| <= 1/beta = 1.43,
    # so its SE over 4000 events is < 0.023; allow 4 SE
    assert abs(stats["debiased_reward"] - np.mean(np.concatenate(true_clicks))) < 0.09
