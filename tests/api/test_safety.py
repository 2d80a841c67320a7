"""Model safety through the service: inputs whose norm overflows or exceeds the model's
``max_feature_norm`` are refused (every path, every repeat), model sizes are checked from
the shapes, calibrated rewards are probabilities, and noise rates only go to models that
use them."""

from __future__ import annotations

from typing import Any

import pytest

from app.learners.registry import ALGORITHMS
from app.tasks import TASKS as SERVED_TASKS
from app.tasks import get_task
from tests.api.conftest import TestClient, new_model

OVERFLOWING = [1e308, 1e308, -1e308, 1e308]  # finite; their squares are not
RIDGE = ["linucb_diag", "squarecb_diag", "linucb"]


def assert_invalid_features(r: Any, field: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_features", field), error
    assert "max_feature_norm" in error["message"]


@pytest.mark.parametrize("algorithm", RIDGE)
@pytest.mark.parametrize("explore", [True, False])
def test_overflowing_features_get_422_on_every_repeat(idle_client: TestClient,
                                                      tenant: dict[str, str], algorithm: str,
                                                      explore: bool) -> None:
    new_model(idle_client, tenant, algorithm=algorithm)
    url = "/v1/models/m1/predict"
    # a valid predict first, so that the model's learner is cached (the fast path's case)
    assert idle_client.post(url, json={"features": [1, 0, 0, 0]}, headers=tenant).status_code == 200
    for _ in range(3):
        r = idle_client.post(url, json={"features": OVERFLOWING, "explore": explore},
                             headers=tenant)
        assert_invalid_features(r, "features")
        assert "overflow" in r.json()["error"]["message"]
    r = idle_client.post(url, json={"instances": [[1, 0, 0, 0], OVERFLOWING],
                                    "explore": explore}, headers=tenant)
    assert_invalid_features(r, "instances[1]")
    assert idle_client.post(url, json={"features": [0, 1, 0, 0]}, headers=tenant).status_code == 200


def test_overflowing_features_over_the_websocket(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    with client.websocket_connect("/v1/models/m1/stream", headers=tenant) as ws:
        ws.send_json({"op": "predict", "id": 0, "features": [1, 0, 0, 0]})
        for i in range(1, 3):
            ws.send_json({"op": "predict", "id": i, "features": OVERFLOWING})
        ws.send_json({"op": "predict", "id": 3, "instances": [OVERFLOWING]})
        replies = [ws.receive_json() for _ in range(4)]
    assert "result" in replies[0]
    assert [(r["error"]["code"], r["error"]["field"]) for r in replies[1:]] == [
        ("invalid_features", "features"), ("invalid_features", "features"),
        ("invalid_features", "instances[0]")]


def test_max_feature_norm_bounds_every_input(client: TestClient, tenant: dict[str, str]) -> None:
    m = new_model(client, tenant, algorithm="rcine")
    assert m["max_feature_norm"] == 1e6
    url = "/v1/models/m1/predict"
    assert_invalid_features(client.post(url, json={"features": [1e200, 0, 0, 0]},
                                        headers=tenant), "features")
    assert_invalid_features(client.post(url, json={"features": {"indices": [2],
                                                                "values": [2e6]}},
                                        headers=tenant), "features")
    assert client.post(url, json={"features": [6e5, 8e5, 0, 0]},  # norm 1e6: accepted
                       headers=tenant).status_code == 200
    new_model(client, tenant, model_id="wide", algorithm="rcine", max_feature_norm=1e7)
    assert client.post("/v1/models/wide/predict", json={"features": [2e6, 0, 0, 0]},
                       headers=tenant).status_code == 200
    # inputs that come with feedback: noisy_label examples and noisy_input copies
    new_model(client, tenant, model_id="nl", task="noisy_label", algorithm="uma")
    r = client.post("/v1/models/nl/feedback", json={"events": [
        {"features": [1, 0, 0, 0], "label": 1}, {"features": [0, 0, 3e6, 0], "label": 0}]},
        headers=tenant)
    assert r.status_code == 202 and r.json()["accepted"] == 1
    assert r.json()["rejected"][0]["error"]["code"] == "invalid_features"
    assert r.json()["rejected"][0]["error"]["field"] == "events[1].features"
    new_model(client, tenant, model_id="ni", task="noisy_input", algorithm="kernel_ogd",
              n_classes=None, max_feature_norm=10.0)
    d = client.post("/v1/models/ni/predict", json={"features": [1, 0, 0, 0]},
                    headers=tenant).json()
    r = client.post("/v1/models/ni/feedback", json={
        "event_id": d["event_id"], "target": 1.0, "copies": [[1, 0, 0, 0], [0, 20, 0, 0]]},
        headers=tenant)
    assert_invalid_features(r, "copies[1]")


@pytest.mark.parametrize("value", [0, -1.0, 1e151])
def test_max_feature_norm_out_of_range_422(client: TestClient, tenant: dict[str, str],
                                           value: Any) -> None:
    r = client.post("/v1/models", json={"model_id": "m1", "task": "label", "n_features": 4,
                                        "n_classes": 3, "max_feature_norm": value},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "max_feature_norm", r.text


def test_every_registered_task_is_served_and_another_is_refused(
        client: TestClient, tenant: dict[str, str]) -> None:
    assert {task for task, _ in ALGORITHMS} == set(SERVED_TASKS)
    r = client.post("/v1/models", json={"model_id": "m1", "task": "ranking", "n_features": 4},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "task", r.text


@pytest.mark.parametrize(("task", "algorithm"),
                         sorted(case for case in ALGORITHMS if case[0] in SERVED_TASKS))
def test_huge_shapes_are_refused_before_allocation(client: TestClient, tenant: dict[str, str],
                                                   task: str, algorithm: str) -> None:
    body: dict[str, Any] = {"model_id": "big", "task": task, "algorithm": algorithm,
                            "n_features": 1_000_000}
    if get_task(task).needs_classes:
        body["n_classes"] = 10_000
    r = client.post("/v1/models", json=body, headers=tenant)
    if task == "regression":  # one weight per feature: 8 MB
        assert r.status_code == 201, r.text
        return
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "params" and "MiB" in r.json()["error"]["message"]


@pytest.mark.parametrize(("overrides", "small"), [
    ({"algorithm": "linucb", "n_features": 1000, "n_classes": 5,
      "params": {"max_features": 4096}}, {"n_features": 100}),
    ({"algorithm": "rcine", "n_features": 10_000, "params": {"n_s": 100_000}},
     {"params": {"n_s": 300}}),
    ({"task": "noisy_label", "algorithm": "uma", "n_features": 2000,
      "params": {"window": 100_000}}, {"params": {"window": 1000}}),
    ({"task": "noisy_input", "algorithm": "kernel_ogd", "n_classes": None, "n_features": 1000,
      "params": {"budget": 100_000}}, {"params": {"budget": 100}}),
    ({"task": "noisy_input", "algorithm": "kernel_ogd", "n_classes": None, "n_features": 100,
      "params": {"explicit_dim": 10**8, "budget": 10}}, {"params": {"explicit_dim": 10**4,
                                                                     "budget": 10}}),
    ({"algorithm": "soba", "n_features": 1000, "n_classes": 4, "params": {"diagonal": False}},
     {"params": {"diagonal": True}}),
])
def test_size_parameters_count_toward_the_limit(client: TestClient, tenant: dict[str, str],
                                                overrides: dict[str, Any],
                                                small: dict[str, Any]) -> None:
    body: dict[str, Any] = {"model_id": "m1", "task": "label", "n_classes": 3, **overrides}
    body = {k: v for k, v in body.items() if v is not None}
    r = client.post("/v1/models", json=body, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "params", r.text
    r = client.post("/v1/models", json={**body, **small}, headers=tenant)
    assert r.status_code == 201, r.text


def test_expected_reward_is_a_probability_flagged_when_unreliable(
        idle_client: TestClient, tenant: dict[str, str]) -> None:
    new_model(idle_client, tenant, algorithm="linucb_diag",
              params={"rho0": 0.45, "rho1": 0.4})
    url = "/v1/models/m1/predict"
    # an untrained model predicts an observed rate of 0: (0 - 0.45) / 0.15 = -3 unclipped
    out = idle_client.post(url, json={"features": [1, 0, 0, 0]}, headers=tenant).json()
    assert out["expected_reward"] == 0.0 and out["calibration_unreliable"] is True
    r = idle_client.put("/v1/models/m1/noise", json={"rho0": 0.1, "rho1": 0.2}, headers=tenant)
    assert r.status_code == 200
    for _ in range(2):  # the regular path, then the fast path
        out = idle_client.post(url, json={"features": [1, 0, 0, 0]}, headers=tenant).json()
        assert out["expected_reward"] == 0.0 and out["calibration_unreliable"] is False


@pytest.mark.parametrize(("overrides", "status"), [
    ({"task": "label_set", "algorithm": "mc_dbf"}, 422),
    ({"algorithm": "banditron"}, 422),
    ({"algorithm": "soba"}, 422),
    ({"algorithm": "soba", "params": {"noise_corrected": True}}, 200),
    ({"algorithm": "rcnbf"}, 200),
    ({"algorithm": "linucb_diag"}, 200),
])
def test_noise_rates_only_for_models_that_use_them(client: TestClient, tenant: dict[str, str],
                                                   overrides: dict[str, Any],
                                                   status: int) -> None:
    new_model(client, tenant, **overrides)
    before = client.get("/v1/models/m1/noise", headers=tenant).json()
    r = client.put("/v1/models/m1/noise", json={"rho0": 0.2, "rho1": 0.3}, headers=tenant)
    assert r.status_code == status, r.text
    after = client.get("/v1/models/m1/noise", headers=tenant).json()
    if status == 422:
        error = r.json()["error"]
        assert error["code"] == "noise_rates_unused"
        if overrides["task" if "task" in overrides else "algorithm"] == "label_set":
            assert "no label_set algorithm uses them" in error["message"]
        else:
            assert "rcnbf" in error["message"] and "linucb_diag" in error["message"]
        assert after == before
    else:
        assert (after["rho0"], after["rho1"], after["source"]) == (0.2, 0.3, "configured")
