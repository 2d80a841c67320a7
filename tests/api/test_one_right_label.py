"""The label anchor estimate's assumption, one right label per input, through the service:
stated by the learner's setting (rcnbf) or by the model's owner (``PUT .../noise``), never
inferred. Unstated, plays whose estimate would be published are refused
``one_right_label_unstated`` and every number the rates calibrate is flagged; stated, the
same rule publishes them; the statement taken back withdraws the published estimate."""

from __future__ import annotations

import numpy as np
import pytest

from tests.api.conftest import TestClient, new_model
from tests.api.test_noise_service import _request_estimate, answer_with_noisy_clicks
from tests.api.test_noise_withdrawal import RATES, D, K, append_plays

pytestmark = pytest.mark.slow


def _state(client: TestClient, tenant: dict[str, str], stated: bool | None) -> bool | None:
    r = client.put("/v1/models/m1/noise", headers=tenant, json={"one_right_label": stated})
    assert r.status_code == 200, r.text
    value: bool | None = r.json()["one_right_label"]
    return value


def test_a_ridge_model_publishes_rates_only_once_one_right_label_is_stated(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant, algorithm="linucb_diag", n_features=D, n_classes=K)
    fresh = client.get("/v1/models/m1/noise", headers=tenant).json()
    # said from the start, before any estimate has run
    assert (fresh["one_right_label"], fresh["reason"]) == (False, "one_right_label_unstated")
    rng = np.random.default_rng(5)
    W = rng.standard_normal((K, D))
    answer_with_noisy_clicks(client, tenant, redis_url, rng.standard_normal((600, D)), W,
                             RATES, rng)
    # an oracle scorer's plays, whose estimate the anchor rule publishes once stated
    append_plays(redis_url, 40_000, seed=0, against_clicks=False)
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["status"], estimate["reason"], estimate["rho0"]) == (
        "insufficient_data", "one_right_label_unstated", None), estimate
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["source"], noise["calibration_unreliable"]) == (
        "insufficient_data", "initial", True), noise
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"][
        "calibration_unreliable"] is True

    assert _state(client, tenant, True) is True
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert estimate["status"] == "published", estimate
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["calibration_unreliable"]) == ("published", False), noise

    # taken back (null: the learner's setting, which states nothing), the estimate in use
    # is withdrawn: its rates stay, flagged
    assert _state(client, tenant, None) is False
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert estimate["reason"] == "one_right_label_unstated", estimate
    withdrawn = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (withdrawn["withdrawn"], withdrawn["calibration_unreliable"],
            withdrawn["rho0"]) == ("one_right_label_unstated", True, noise["rho0"]), withdrawn


def test_the_statement_is_the_learners_setting_and_only_where_the_estimate_rests_on_it(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="rcnbf", n_features=D, n_classes=K)
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["one_right_label"] is True
    assert _state(client, tenant, False) is False
    assert _state(client, tenant, None) is True
    r = client.put("/v1/models/m1/noise", headers=tenant, json={"one_right_label": "maybe"})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "one_right_label"), r.text

    assert client.post("/v1/models", headers=tenant, json={
        "model_id": "r1", "task": "rank", "n_features": 3, "n_action_features": 2,
        "slots": 3}).status_code == 201
    assert client.get("/v1/models/r1/noise", headers=tenant).json()["one_right_label"] is None
    r = client.put("/v1/models/r1/noise", headers=tenant, json={"one_right_label": True})
    assert (r.status_code, r.json()["error"]["code"], r.json()["error"]["field"]) == (
        422, "one_right_label_unused", "one_right_label"), r.text
