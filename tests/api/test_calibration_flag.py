"""``calibration_unreliable`` on decisions follows the model's noise status: true while the
rates are initial ones awaiting an estimate, false once an estimate is published or the
estimator is ``fixed``, and the same on the regular path, the one-round-trip fast path,
a batch and the WebSocket."""

from __future__ import annotations

import asyncio
from typing import Any

from app.store import Store
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, new_tenant
from tests.api.test_fastpath import predicted_by

X = [1.0, 0.0, 0.5, 0.0]


def _publish_estimate(redis_url: str, rho0: float, rho1: float) -> None:
    """Store an estimate as the jobs role publishes one."""
    async def run() -> None:
        store = Store.from_url(redis_url)
        await store.noise.put(ModelKeys("acme", "m1"), rho0, rho1, source="estimated",
                              n_samples=20_000)
        await store.close()
    asyncio.run(run())


def _flags(client: TestClient, auth: dict[str, str]) -> dict[str, Any]:
    """The flag from each way of predicting, and the paths the two single predicts took."""
    regular, path1 = predicted_by(client, auth)
    fast, path2 = predicted_by(client, auth)
    batch = client.post("/v1/models/m1/predict", json={"instances": [X, X]}, headers=auth)
    with client.websocket_connect("/v1/models/m1/stream", headers=auth) as ws:
        ws.send_json({"op": "predict", "id": 0, "features": X})
        stream = ws.receive_json()["result"]
    return {"paths": (path1, path2),
            "flags": [regular.json()["calibration_unreliable"],
                      fast.json()["calibration_unreliable"],
                      *(p["calibration_unreliable"] for p in batch.json()["predictions"]),
                      stream["calibration_unreliable"]]}


def test_flag_true_until_an_estimate_is_published(idle_client: TestClient,
                                                  redis_url: str) -> None:
    auth = new_tenant(idle_client)
    new_model(idle_client, auth, algorithm="linucb_diag")
    fresh = _flags(idle_client, auth)
    assert fresh["flags"] == [True] * 5
    assert fresh["paths"][1] == "one_round_trip"
    _publish_estimate(redis_url, 0.1, 0.2)
    published = _flags(idle_client, auth)
    assert published["flags"] == [False] * 5
    assert published["paths"] == ("regular", "one_round_trip")


def test_fixed_estimator_without_given_rates_keeps_the_flag_until_rates_are_configured(
        idle_client: TestClient) -> None:
    auth = new_tenant(idle_client)
    new_model(idle_client, auth, algorithm="linucb_diag")
    assert _flags(idle_client, auth)["flags"] == [True] * 5
    # 0/0 that nobody gave stays unreliable under the fixed estimator
    r = idle_client.put("/v1/models/m1/noise", json={"estimator": "fixed"}, headers=auth)
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["reason"]) == ("fixed", "rates_not_given")
    assert _flags(idle_client, auth)["flags"] == [True] * 5
    # the rates stay (0, 0): only their source changes, and the cached learner must follow
    r = idle_client.put("/v1/models/m1/noise", json={"rho0": 0.0, "rho1": 0.0}, headers=auth)
    assert r.status_code == 200 and r.json()["source"] == "configured", r.text
    fixed = _flags(idle_client, auth)
    assert fixed["flags"] == [False] * 5
    assert fixed["paths"] == ("regular", "one_round_trip")
    stats = idle_client.get("/v1/models/m1", headers=auth).json()["stats"]
    assert stats["calibration_unreliable"] in (False, None)


def test_fixed_estimator_with_rates_given_at_creation_clears_the_flag(
        idle_client: TestClient) -> None:
    auth = new_tenant(idle_client)
    new_model(idle_client, auth, algorithm="linucb_diag", params={"rho0": 0.1, "rho1": 0.2})
    assert _flags(idle_client, auth)["flags"] == [True] * 5  # awaiting an anchor estimate
    r = idle_client.put("/v1/models/m1/noise", json={"estimator": "fixed"}, headers=auth)
    assert r.status_code == 200 and r.json()["reason"] == "", r.text
    assert _flags(idle_client, auth)["flags"] == [False] * 5


def test_rates_of_0_and_0_given_at_creation_are_given(idle_client: TestClient) -> None:
    """Initial rates of 0 and 0 named in the params are the user's: under the ``fixed``
    estimator they are reliable (no ``rates_not_given``), as other given rates are."""
    auth = new_tenant(idle_client)
    new_model(idle_client, auth, algorithm="linucb_diag", params={"rho0": 0.0, "rho1": 0.0})
    r = idle_client.put("/v1/models/m1/noise", json={"estimator": "fixed"}, headers=auth)
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["reason"]) == ("fixed", ""), r.text
    assert _flags(idle_client, auth)["flags"] == [False] * 5


def test_a_new_model_is_flagged_before_its_first_event(idle_client: TestClient) -> None:
    """No event yet, rates awaiting an estimate: nothing to stand behind, flagged as the
    decisions are; configured rates are a basis."""
    auth = new_tenant(idle_client)
    stats = new_model(idle_client, auth, algorithm="linucb_diag")["stats"]
    assert (stats["debiased_reward"], stats["calibration_unreliable"]) == (None, True)
    r = idle_client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2}, headers=auth)
    assert r.status_code == 200, r.text
    stats = idle_client.get("/v1/models/m1", headers=auth).json()["stats"]
    assert (stats["debiased_reward"], stats["calibration_unreliable"]) == (None, False)
