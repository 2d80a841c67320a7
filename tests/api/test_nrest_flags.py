"""Rates NREst published (no interval) are flagged wherever they are used: the model's
``debiased_reward``, each decision's ``expected_reward``, the series points and the
challengers' values say ``calibration_unreliable`` with reason ``no_interval``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.api.conftest import TestClient, new_model, new_tenant, predict_all
from tests.api.test_noise_service import _request_estimate, answer_with_noisy_clicks

K, D, RATES = 3, 4, (0.1, 0.2)


@pytest.mark.slow
def test_nrest_rates_without_an_interval_are_flagged_everywhere(
        recording_client: TestClient, redis_url: str) -> None:
    client = recording_client
    tenant = new_tenant(client)
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    assert client.post("/v1/models/m1/challengers", headers=tenant, json={
        "name": "uniform", "algorithm": "squarecb_diag",
        "params": {"gamma_scale": 0.0}}).status_code == 201
    r = client.put("/v1/models/m1/noise", json={"estimator": "nrest"}, headers=tenant)
    assert r.status_code == 200, r.text
    rng = np.random.default_rng(3)
    W = rng.standard_normal((K, D))
    for _ in range(3):
        answer_with_noisy_clicks(client, tenant, redis_url, rng.standard_normal((1000, D)), W,
                                 RATES, rng)
    out = _request_estimate(client, tenant, redis_url)
    assert out["status"] == "published", out
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    # what was checked: NREst's rates are in force, without an interval
    assert (noise["estimator"], noise["status"], noise["source"]) == (
        "nrest", "published", "estimated"), noise
    assert noise["interval"] is None
    # rates the calibration would stand behind were they given: flagged only for their interval
    assert 1.0 - noise["rho0"] - noise["rho1"] >= 0.2, noise
    answer_with_noisy_clicks(client, tenant, redis_url, rng.standard_normal((200, D)), W,
                             RATES, rng)
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["debiased_reward"] is not None and stats["calibration_unreliable"] is True
    preds = predict_all(client, tenant, rng.standard_normal((20, D)))
    assert all(p["expected_reward"] is not None and p["calibration_unreliable"] for p in preds)
    points = client.get("/v1/models/m1/series", headers=tenant).json()["points"]
    last = points[-1]
    assert last["noise_source"] == "estimated", last
    assert (last["calibration_unreliable"], last["reason"]) == (True, "no_interval"), last
    body = client.get("/v1/models/m1/challengers", headers=tenant).json()
    assert (body["calibration_unreliable"], body["reason"]) == (True, "no_interval"), body
