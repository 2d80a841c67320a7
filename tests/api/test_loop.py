"""The end-to-end loop: tenant -> model -> predict -> feedback -> trainer -> new version."""

from __future__ import annotations

import pytest

from tests.api.conftest import TestClient, new_model


@pytest.mark.slow
def test_loop_feedback_updates_model(client: TestClient, tenant: dict[str, str]) -> None:
    model = new_model(client, tenant)
    assert model["version"] == 1 and model["stats"]["predictions"] == 0
    r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0.5]}, headers=tenant)
    assert r.status_code == 200, r.text
    pred = r.json()
    assert set(pred) >= {"event_id", "label", "probability", "greedy_label", "model_version"}
    r = client.post("/v1/models/m1/feedback", json={"event_id": pred["event_id"], "click": True},
                    headers=tenant)
    assert r.status_code == 202 and r.json() == {"accepted": True}
    r = client.post("/v1/models/m1/sync", headers=tenant)
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 2 and r.json()["pending"] == 0
    got = client.get("/v1/models/m1", headers=tenant).json()
    assert got["stats"]["events_applied"] == 1 and got["stats"]["feedback_accepted"] == 1
    r = client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0.5]}, headers=tenant)
    assert r.json()["model_version"] == 2
