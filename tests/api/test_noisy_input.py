"""The noisy_input task through HTTP: kernel OGD, copies_needed, feedback in parts (more_copies)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.api.conftest import TestClient, post_feedback, predict_all


def _model(client: TestClient, auth: dict[str, str], **overrides: Any) -> dict[str, Any]:
    body = {"model_id": "m1", "task": "noisy_input", "n_features": 3, "seed": 0, **overrides}
    r = client.post("/v1/models", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()


def test_create_service_defaults_keep_snapshots_small(client: TestClient,
                                                      tenant: dict[str, str]) -> None:
    m = _model(client, tenant, n_features=100)
    assert m["algorithm"] == "kernel_ogd"
    assert m["params"]["budget"] == 200 and m["params"]["max_order"] == 12
    r = client.get("/v1/models/m1/snapshot", headers=tenant)
    sizes = {name: np.prod(a["shape"]) * 8 for name, a in r.json()["state"].items()}
    assert sum(sizes.values()) < 2.5 * 2**20, sizes
    r = client.post("/v1/models", json={"model_id": "m2", "task": "noisy_input",
                                        "n_features": 3, "n_classes": 2}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "n_classes"
    r = client.post("/v1/models", json={"model_id": "m3", "task": "noisy_input",
                                        "n_features": 1000, "params": {"budget": 1000}},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "params"
    assert "MiB" in r.json()["error"]["message"]


@pytest.mark.parametrize(("body", "field"), [
    ({"target": 1.0, "copies": [[1.0, 2.0]]}, "copies[0]"),
    ({"target": 1.0, "copies": [[1.0, 2.0, "x"]]}, "copies[0][2]"),
    ({"copies": [[1.0, 2.0, 3.0]]}, "target"),
    ({"target": "a", "copies": []}, "target"),
    ({"target": 1.0, "values": [1.0]}, "values"),
])
def test_feedback_invalid_422(client: TestClient, tenant: dict[str, str], body: dict[str, Any],
                              field: str) -> None:
    _model(client, tenant, params={"kernel": "linear"})
    eid = predict_all(client, tenant, np.ones((1, 3)))[0]["event_id"]
    r = post_feedback(client, tenant, {"event_id": eid, **body})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


@pytest.mark.slow
def test_more_copies_flow(client: TestClient, tenant: dict[str, str]) -> None:
    _model(client, tenant)                             # gaussian kernel: random plans
    preds = predict_all(client, tenant, np.ones((50, 3)))
    assert all(set(p) == {"event_id", "value", "copies_needed", "model_version"} for p in preds)
    p = next(p for p in preds if p["copies_needed"] >= 3)
    k = p["copies_needed"]
    copies = np.random.default_rng(0).normal(1.0, 0.1, (k + 1, 3)).tolist()
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "target": 0.5,
                                   "copies": copies[:1]})
    assert r.status_code == 202 and r.json() == {"accepted": True, "more_copies": k - 1}
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "target": 0.7,
                                   "copies": copies[1:2]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "target"
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "copies": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "copies"
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "copies": copies[1:2]})
    assert r.json() == {"accepted": True, "more_copies": k - 2}
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["feedback_accepted"] == 0
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "target": 0.5,
                                   "copies": copies[2:]})   # one more than needed: ignored
    assert r.json() == {"accepted": True}
    assert post_feedback(client, tenant, {"event_id": p["event_id"],
                                      "copies": copies[:1]}).status_code == 409
    none = next(p for p in preds if p["copies_needed"] == 0)
    assert post_feedback(client, tenant, {"event_id": none["event_id"],
                                      "target": 0.5}).json() == {"accepted": True}
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] >= 2
    model = client.get("/v1/models/m1", headers=tenant).json()
    assert model["stats"]["events_applied"] == 2
    state = client.get("/v1/models/m1/snapshot", headers=tenant).json()["state"]
    assert "t_" in state


@pytest.mark.slow
def test_kernel_ogd_linear_learns_from_noisy_copies(client: TestClient,
                                                    tenant: dict[str, str]) -> None:
    d, sigma = 3, 1.0
    _model(client, tenant, n_features=d, params={"kernel": "linear", "eta": 0.01})
    rng = np.random.default_rng(0)
    w = np.array([1.0, -0.5, 0.8])
    X_test = rng.standard_normal((300, d))

    def mse() -> float:
        values = np.array([p["value"] for p in predict_all(client, tenant, X_test, explore=False)])
        return float(np.mean((values - X_test @ w) ** 2))

    before = mse()
    X = rng.standard_normal((3000, d))
    preds = predict_all(client, tenant, X + rng.normal(0, sigma, X.shape))
    assert {p["copies_needed"] for p in preds} == {1}   # linear + squared: two copies per round
    for start in range(0, len(X), 1000):
        r = post_feedback(client, tenant, {"events": [
            {"event_id": preds[i]["event_id"], "target": float(X[i] @ w),
             "copies": (X[i] + rng.normal(0, sigma, (1, d))).tolist()}
            for i in range(start, start + 1000)]})
        assert r.json()["accepted"] == 1000 and "open" not in r.json()
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] >= 2
    # the naive single-copy learner would stop near w / (1 + sigma^2): MSE ~ |w|^2 / 4 = 0.47
    assert mse() < 0.1 * before and mse() < 0.2


@pytest.mark.slow
def test_classification_loss_needs_a_sign_target(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    _model(client, tenant, params={"kernel": "linear", "loss": "smooth_hinge"})
    p = predict_all(client, tenant, np.ones((1, 3)))[0]
    assert p["label"] in (-1, 1)
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "target": 0.5,
                                   "copies": np.ones((p["copies_needed"], 3)).tolist()})
    assert r.status_code == 422 and r.json()["error"]["field"] == "target"
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "target": -1,
                                   "copies": np.ones((p["copies_needed"], 3)).tolist()})
    assert r.json() == {"accepted": True}
    client.post("/v1/models/m1/sync", headers=tenant)
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 1
