"""The regression task through HTTP: ORS/NLMS, feedback in parts (more_labels), label budgets."""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import numpy as np
import pytest

from app.api.openfeedback import take_open
from app.learners.ors import ORS
from app.store.keys import ModelKeys
from app.tasks import get_task
from tests.api.conftest import TestClient, post_feedback, predict_all
from tests.deadlines import pass_deadlines_async


def _model(client: TestClient, auth: dict[str, str], **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"task": "regression", "algorithm": "ors", "n_features": 3,
                            "n_classes": None, **overrides}
    body = {k: v for k, v in body.items() if v is not None}
    r = client.post("/v1/models", json={"model_id": "m1", "seed": 0, **body}, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()


def _weights(client: TestClient, auth: dict[str, str]) -> np.ndarray:
    state = client.get("/v1/models/m1/snapshot", headers=auth).json()["state"]
    return np.load(io.BytesIO(base64.b64decode(state["w_"]["data_b64"])))


def test_create_regression_defaults_and_validation(client: TestClient,
                                                   tenant: dict[str, str]) -> None:
    m = _model(client, tenant, algorithm=None)
    assert m["algorithm"] == "ors" and m["n_classes"] is None and m["label_budget"] is None
    assert m["params"]["r"] == 30.0
    bad = [({"n_classes": 3}, "n_classes"),
           ({"label_budget": {"budget": 0.5}}, "label_budget.budget"),
           ({"label_budget": {"budget": 2, "strategy": "begin"}}, "label_budget.horizon"),
           ({"algorithm": "rcnbf"}, "algorithm")]
    for extra, field in bad:
        r = client.post("/v1/models", json={"model_id": "m2", "task": "regression",
                                            "n_features": 3, **extra}, headers=tenant)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    r = client.post("/v1/models", json={"model_id": "m3", "task": "noisy_label", "n_features": 3,
                                        "n_classes": 3, "label_budget": {"budget": 2}},
                    headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "label_budget"


@pytest.mark.parametrize(("body", "field"), [
    ({"values": []}, "values"),
    ({}, "values"),
    ({"values": [1.0], "variance": -0.5}, "variance"),
    ({"values": [1.0], "click": True}, "click"),
    ({"values": ["a"]}, "values[0]"),
])
def test_feedback_invalid_422(client: TestClient, tenant: dict[str, str], body: dict[str, Any],
                              field: str) -> None:
    _model(client, tenant)
    eid = predict_all(client, tenant, np.ones((1, 3)))[0]["event_id"]
    r = post_feedback(client, tenant, {"event_id": eid, **body})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_feedback_non_finite_422(client: TestClient, tenant: dict[str, str]) -> None:
    _model(client, tenant)
    eid = predict_all(client, tenant, np.ones((1, 3)))[0]["event_id"]
    for raw, field in ((b'{"event_id": "%s", "values": [1.0, NaN]}', "values[1]"),
                       (b'{"event_id": "%s", "values": [1.0], "variance": Infinity}',
                        "variance")):
        r = client.post("/v1/models/m1/feedback", content=raw % eid.encode(),
                        headers={**tenant, "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


@pytest.mark.slow
def test_feedback_unknown_duplicate_and_version(client: TestClient,
                                                tenant: dict[str, str]) -> None:
    _model(client, tenant)
    p = predict_all(client, tenant, np.array([[1.0, 2.0, 3.0]]))[0]
    assert set(p) == {"event_id", "value", "model_version"} and p["value"] == 0.0
    assert post_feedback(client, tenant, {"event_id": "nope", "values": [1.0]}).status_code == 404
    r = post_feedback(client, tenant, {"event_id": p["event_id"], "values": [1.0, 2.0],
                                   "variance": 0.5})
    assert r.status_code == 202 and r.json() == {"accepted": True}
    assert post_feedback(client, tenant, {"event_id": p["event_id"],
                                      "values": [1.0]}).status_code == 409
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] == 2
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 1


@pytest.mark.slow
def test_more_labels_flow_joins_all_values(client: TestClient, tenant: dict[str, str]) -> None:
    # budget 3 with "const": every round gets ceil(3) = 3 labels (p = 1)
    _model(client, tenant, label_budget={"budget": 3, "strategy": "const"})
    x = np.array([1.0, -2.0, 0.5])
    eid = predict_all(client, tenant, x[None])[0]["event_id"]
    r = post_feedback(client, tenant, {"event_id": eid, "values": [1.0], "variance": 0.2})
    assert r.status_code == 202 and r.json() == {"accepted": True, "more_labels": 2}
    r = post_feedback(client, tenant, {"event_id": eid, "values": [1.5], "variance": 0.3})
    assert r.status_code == 422 and r.json()["error"]["field"] == "variance"
    r = post_feedback(client, tenant, {"event_id": eid, "values": [1.5]})
    assert r.json() == {"accepted": True, "more_labels": 1}
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["feedback_accepted"] == 0          # still open
    r = post_feedback(client, tenant, {"event_id": eid, "values": [2.5, 9.0], "variance": 0.2})
    assert r.json() == {"accepted": True}           # one more than asked: kept
    assert post_feedback(client, tenant, {"event_id": eid, "values": [1.0]}).status_code == 409
    client.post("/v1/models/m1/sync", headers=tenant)
    ref = ORS(n_features=3)
    ref.learn_one({"x": x, "values": np.array([1.0, 1.5, 2.5, 9.0]), "variance": 0.2})
    np.testing.assert_allclose(_weights(client, tenant), ref.w_)
    budget = client.get("/v1/models/m1/label-budget", headers=tenant).json()
    assert budget["rounds"] == 1 and budget["labels_used"] == 3


@pytest.mark.slow
def test_open_decision_expires_with_labels_received(client: TestClient,
                                                    tenant: dict[str, str]) -> None:
    _model(client, tenant, label_budget={"budget": 2, "strategy": "const"},
           feedback={"wait_seconds": 1})
    x = np.array([1.0, 0.0, 0.0])
    eid = predict_all(client, tenant, x[None])[0]["event_id"]
    answer = post_feedback(client, tenant, {"event_id": eid, "values": [2.0]}).json()
    assert answer["more_labels"] == 1
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    mk = ModelKeys("acme", "m1")

    async def sweep() -> list[str]:
        assert await pass_deadlines_async(ctx.store.redis, mk) == 1
        due = await ctx.store.events.due_decisions(mk, await ctx.store.events.server_time())
        return await ctx.store.events.expire_many(mk, due, "drop", {})

    assert client.portal.call(sweep) == ["expired"]  # type: ignore[union-attr]
    assert post_feedback(client, tenant, {"event_id": eid, "values": [2.0]}).status_code == 404
    client.post("/v1/models/m1/sync", headers=tenant)
    ref = ORS(n_features=3)
    ref.learn_one({"x": x, "values": np.array([2.0]), "variance": np.nan})
    np.testing.assert_allclose(_weights(client, tenant), ref.w_)


@pytest.mark.slow
def test_budget_never_exceeded_and_events_applied_in_order(client: TestClient,
                                                           tenant: dict[str, str]) -> None:
    budget = 1.5
    _model(client, tenant, label_budget={"budget": budget, "strategy": "auto_self_tuned"})
    rng = np.random.default_rng(3)
    u = rng.standard_normal(3)
    X = rng.standard_normal((600, 3))
    preds = predict_all(client, tenant, X)
    first = rng.normal(X @ u, 1.0)
    asked = 0
    order: list[tuple[int, list[float]]] = []
    for start in range(0, 600, 200):
        idx = range(start, start + 200)
        r = post_feedback(client, tenant, {"events": [
            {"event_id": preds[i]["event_id"], "values": [float(first[i])]} for i in idx]})
        doc = r.json()
        assert doc["accepted"] == 200 and doc["rejected"] == []
        opened = {o["index"] + start: o["more_labels"] for o in doc.get("open", [])}
        asked += sum(opened.values())
        order += [(i, [float(first[i])]) for i in idx if i not in opened]
        more = {i: rng.normal(X[i] @ u, 1.0, k).tolist() for i, k in opened.items()}
        r = post_feedback(client, tenant, {"events": [
            {"event_id": preds[i]["event_id"], "values": v} for i, v in more.items()]})
        assert r.json()["accepted"] == len(more) and "open" not in r.json()
        order += [(i, [float(first[i]), *v]) for i, v in more.items()]
    state = client.get("/v1/models/m1/label-budget", headers=tenant).json()
    assert state["rounds"] == 600 and state["labels_used"] == 600 + asked
    assert state["labels_used"] <= budget * state["rounds"]
    assert asked > 0.5 * (budget - 1) * 600        # the strategy spends a good part of it
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] > 1
    ref = ORS(n_features=3)
    for i, values in order:
        ref.learn_one({"x": X[i], "values": np.array(values), "variance": np.nan})
    np.testing.assert_allclose(_weights(client, tenant), ref.w_, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ors", "nlms"])
def test_regression_learns_linear_gaussian(client: TestClient, tenant: dict[str, str],
                                           algorithm: str) -> None:
    d = 10
    _model(client, tenant, algorithm=algorithm, n_features=d, params={"r": 10.0})
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    X_test = rng.standard_normal((500, d))
    y_test = X_test @ u

    def mse() -> float:
        values = np.array([p["value"] for p in predict_all(client, tenant, X_test, explore=False)])
        return float(np.mean((values - y_test) ** 2))

    before = mse()
    X = rng.standard_normal((2000, d))
    preds = predict_all(client, tenant, X)
    variance = rng.uniform(0, 1.0, len(X))
    noisy = rng.normal(X @ u, np.sqrt(variance))
    for start in range(0, len(X), 1000):
        r = post_feedback(client, tenant, {"events": [
            {"event_id": preds[i]["event_id"], "values": [float(noisy[i])]}
            for i in range(start, start + 1000)]})
        assert r.json()["accepted"] == 1000
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["version"] >= 2
    # MSE against the clean target: from ||u||^2 (~d) to well below the label noise
    assert mse() < 0.05 * before


@pytest.mark.slow
def test_concurrent_first_labels_never_overspend(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    budget, n = 1.5, 30
    _model(client, tenant, label_budget={"budget": budget, "strategy": "const"})
    preds = predict_all(client, tenant, np.ones((n, 3)))
    ctx = client.app.state.ctx  # type: ignore[attr-defined]

    async def burst() -> list[tuple[str, dict[str, int]]]:
        view = await ctx.store.models.view("acme", "m1")
        fields = {"values": np.array([1.0]), "variance": np.array(np.nan)}
        return list(await asyncio.gather(*(
            take_open(ctx, view, get_task("regression"), p["event_id"], fields)
            for p in preds)))

    results = client.portal.call(burst)  # type: ignore[union-attr]
    asked = sum(more.get("more_labels", 0) for _, more in results)
    assert {status for status, _ in results} <= {"ok", "open"}
    state = client.get("/v1/models/m1/label-budget", headers=tenant).json()
    assert state["rounds"] == n and state["labels_used"] == n + asked
    assert state["labels_used"] <= budget * n


@pytest.mark.slow
def test_two_sample_rule_asks_for_a_second_label(client: TestClient,
                                                 tenant: dict[str, str]) -> None:
    _model(client, tenant, params={"alpha_rule": "two_sample"})
    eid = predict_all(client, tenant, np.ones((1, 3)))[0]["event_id"]
    assert post_feedback(client, tenant, {"event_id": eid, "values": [1.0]}).json() == {
        "accepted": True, "more_labels": 1}
    assert post_feedback(client, tenant, {"event_id": eid, "values": [2.0]}).json() == {
        "accepted": True}
    client.post("/v1/models/m1/sync", headers=tenant)
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 1
    r = client.post("/v1/models", json={"model_id": "m2", "task": "regression", "n_features": 3,
                                        "params": {"alpha_rule": "two_sample"},
                                        "label_budget": {"budget": 2}}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "label_budget"
