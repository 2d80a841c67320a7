"""GET/PUT .../noise with the estimator: its status before an estimate, the played rows it
counts, the settings it accepts and the 422s of settings that cannot work."""

from __future__ import annotations

import numpy as np

from tests.api.conftest import TestClient, new_model, predict_all


def test_a_new_model_says_insufficient_data_and_counts_the_observed_plays(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (r["rho0"], r["rho1"], r["source"]) == (0.0, 0.0, "initial")
    assert (r["estimator"], r["status"], r["n_events"], r["max_width"]) == (
        "anchor", "insufficient_data", 0, 0.1)
    assert r["interval"] is None
    X = np.random.default_rng(0).standard_normal((30, 4))
    events = [{"event_id": p["event_id"], "click": i % 2}
              for i, p in enumerate(predict_all(client, tenant, X))]
    assert client.post("/v1/models/m1/feedback", json={"events": events},
                       headers=tenant).status_code in (200, 202)
    assert client.post("/v1/models/m1/sync", headers=tenant).status_code == 200
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (r["status"], r["n_events"], r["source"]) == ("insufficient_data", 30, "initial")


def test_put_sets_the_estimator_and_max_width(client: TestClient,
                                              tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    r = client.put("/v1/models/m1/noise", json={"estimator": "fixed", "max_width": 0.05},
                   headers=tenant)
    assert r.status_code == 200, r.text
    assert (r.json()["estimator"], r.json()["max_width"], r.json()["status"]) == (
        "fixed", 0.05, "fixed")
    r = client.put("/v1/models/m1/noise", json={"estimator": "nrest"}, headers=tenant)
    assert r.status_code == 200 and r.json()["estimator"] == "nrest"
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["estimator"] == "nrest"


def test_put_refuses_settings_that_cannot_work(client: TestClient,
                                               tenant: dict[str, str]) -> None:
    new_model(client, tenant)  # rcnbf: uses rates, keeps no NREst samples
    r = client.put("/v1/models/m1/noise", json={"estimator": "nrest"}, headers=tenant)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "estimator_unavailable"
    assert r.json()["error"]["field"] == "estimator"
    for bad in ({}, {"rho0": 0.1}, {"max_width": 0}, {"max_width": 1.5},
                {"estimator": "mixture"}):
        assert client.put("/v1/models/m1/noise", json=bad, headers=tenant).status_code == 422
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["estimator"] == "anchor"
