"""Batches of feedback in parts (regression, noisy_input): one read and one Lua take per batch,
with the outcomes, errors, budget charges and learned weights of the same events sent one by one."""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Any

import numpy as np
import pytest

from app.api.openfeedback import take_open_many
from app.tasks import get_task
from tests.api.conftest import TestClient, post_feedback, predict_all


def _model(client: TestClient, auth: dict[str, str], model_id: str = "m1",
           **overrides: Any) -> None:
    body = {"model_id": model_id, "task": "regression", "algorithm": "ors", "n_features": 3,
            "seed": 0, **overrides}
    r = client.post("/v1/models", json=body, headers=auth)
    assert r.status_code == 201, r.text


def _weights(client: TestClient, auth: dict[str, str], model_id: str) -> np.ndarray:
    state = client.get(f"/v1/models/{model_id}/snapshot", headers=auth).json()["state"]
    return np.load(io.BytesIO(base64.b64decode(state["w_"]["data_b64"])))


def _count_calls(monkeypatch: pytest.MonkeyPatch, obj: Any, name: str,
                 calls: dict[str, int]) -> None:
    """Count the calls of ``obj.name`` in ``calls[name]`` (the real method still runs)."""
    real = getattr(obj, name)

    def counted(*args: Any) -> Any:
        calls[name] += 1
        return real(*args)

    monkeypatch.setattr(obj, name, counted)


@pytest.mark.slow
def test_regression_batch_matches_one_by_one(client: TestClient, tenant: dict[str, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    budget = {"budget": 1.5, "strategy": "const"}     # one more label in about half the rounds
    _model(client, tenant, "one", label_budget=budget)
    _model(client, tenant, "batch", label_budget=budget)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]))[:, None] + rng.normal(0, 0.3, (60, 2))
    one = predict_all(client, tenant, X, model="one")
    batch = predict_all(client, tenant, X, model="batch")

    asked_one = {}
    for i, p in enumerate(one):
        r = post_feedback(client, tenant, {"event_id": p["event_id"], "values": [y[i, 0]]},
                          model="one")
        assert r.status_code == 202
        if "more_labels" in r.json():
            asked_one[i] = r.json()["more_labels"]
    for i in asked_one:
        r = post_feedback(client, tenant, {"event_id": one[i]["event_id"], "values": [y[i, 1]]},
                          model="one")
        assert r.json() == {"accepted": True}

    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    calls = {"read_many": 0, "take_many": 0}
    for name in calls:
        _count_calls(monkeypatch, ctx.store.open, name, calls)
    doc = post_feedback(client, tenant, {"events": [
        {"event_id": p["event_id"], "values": [y[i, 0]]} for i, p in enumerate(batch)]},
        model="batch").json()
    assert calls == {"read_many": 1, "take_many": 1}
    assert doc["accepted"] == 60 and doc["rejected"] == []
    assert {o["index"]: o["more_labels"] for o in doc["open"]} == asked_one
    assert 10 < len(asked_one) < 50
    assert all(o["event_id"] == batch[o["index"]]["event_id"] for o in doc["open"])
    doc = post_feedback(client, tenant, {"events": [
        {"event_id": batch[i]["event_id"], "values": [y[i, 1]]} for i in asked_one]},
        model="batch").json()
    assert doc == {"accepted": len(asked_one), "rejected": []}

    for model in ("one", "batch"):
        client.post(f"/v1/models/{model}/sync", headers=tenant)
    budgets = [client.get(f"/v1/models/{m}/label-budget", headers=tenant).json()
               for m in ("one", "batch")]
    assert budgets[0] == budgets[1] and budgets[0]["rounds"] == 60
    stats = [client.get(f"/v1/models/{m}", headers=tenant).json()["stats"]
             for m in ("one", "batch")]
    assert stats[0]["events_applied"] == stats[1]["events_applied"] == 60
    np.testing.assert_allclose(_weights(client, tenant, "batch"),
                               _weights(client, tenant, "one"), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_regression_batch_rejects_bad_items_alone(client: TestClient,
                                                  tenant: dict[str, str]) -> None:
    _model(client, tenant, params={"alpha_rule": "two_sample"})    # two labels per event
    e0, e1, e2 = (p["event_id"] for p in predict_all(client, tenant, np.ones((3, 3))))
    doc = post_feedback(client, tenant, {"events": [
        {"event_id": e0, "values": [1.0]},                     # 0: open, wants 1 more
        {"event_id": e0, "values": [2.0]},                     # 1: completes e0
        {"event_id": e0, "values": [3.0]},                     # 2: e0 already joined
        {"event_id": "nope", "values": [1.0]},                 # 3: never issued
        {"event_id": e1, "values": [1.0], "variance": -1.0},   # 4: invalid
        {"event_id": e1, "values": [1.0, 2.0], "variance": 0.5},
        {"event_id": e2, "values": [1.0], "variance": 0.5},    # 6: open
        {"event_id": e2, "values": [2.0], "variance": 0.7},    # 7: variance differs
    ]}).json()
    assert doc["accepted"] == 4
    assert [(r["index"], r["error"]["code"], r["error"]["field"]) for r in doc["rejected"]] == [
        (2, "duplicate_feedback", "events[2].event_id"),
        (3, "unknown_event", "events[3].event_id"),
        (4, "invalid_request", "events[4].variance"),
        (7, "invalid_feedback", "events[7].variance")]
    assert doc["open"] == [{"index": 0, "event_id": e0, "more_labels": 1},
                           {"index": 6, "event_id": e2, "more_labels": 1}]
    # e2 is still open: a later part completes it, a repeat of e0 is 409 as a single event
    assert post_feedback(client, tenant, {"event_id": e2, "values": [2.0]}).json() == {
        "accepted": True}
    assert post_feedback(client, tenant, {"event_id": e0, "values": [1.0]}).status_code == 409
    client.post("/v1/models/m1/sync", headers=tenant)
    stats = client.get("/v1/models/m1", headers=tenant).json()["stats"]
    assert stats["feedback_accepted"] == 3 and stats["events_applied"] == 3


@pytest.mark.slow
def test_noisy_input_batch_takes_parts_of_one_event_in_order(client: TestClient,
                                                            tenant: dict[str, str]) -> None:
    r = client.post("/v1/models", json={"model_id": "m1", "task": "noisy_input",
                                        "n_features": 3, "seed": 0}, headers=tenant)
    assert r.status_code == 201, r.text
    preds = predict_all(client, tenant, np.ones((50, 3)))
    p = next(p for p in preds if p["copies_needed"] >= 3)
    q = next(q for q in preds if q["copies_needed"] >= 1 and q is not p)
    none = next(n for n in preds if n["copies_needed"] == 0)
    k = p["copies_needed"]
    copies = np.random.default_rng(0).normal(1.0, 0.1, (k + 1, 3)).tolist()
    doc = post_feedback(client, tenant, {"events": [
        {"event_id": p["event_id"], "target": 0.5, "copies": copies[:1]},   # 0: open
        {"event_id": p["event_id"], "copies": copies[1:2]},                 # 1: still open
        {"event_id": p["event_id"], "target": 0.7, "copies": copies[2:3]},  # 2: target differs
        {"event_id": q["event_id"], "copies": copies[:1]},                  # 3: no target
        {"event_id": none["event_id"], "target": 0.5},                      # 4: joined
        {"event_id": p["event_id"], "target": 0.5, "copies": copies[2:]},   # 5: completes p
    ]}).json()
    assert doc["accepted"] == 4
    assert [(r["index"], r["error"]["field"]) for r in doc["rejected"]] == [
        (2, "events[2].target"), (3, "events[3].target")]
    assert doc["open"] == [{"index": 0, "event_id": p["event_id"], "more_copies": k - 1},
                           {"index": 1, "event_id": p["event_id"], "more_copies": k - 2}]
    client.post("/v1/models/m1/sync", headers=tenant)
    assert client.get("/v1/models/m1", headers=tenant).json()["stats"]["events_applied"] == 2


def test_concurrent_batches_never_overspend(client: TestClient, tenant: dict[str, str]) -> None:
    budget, n = 1.5, 60
    _model(client, tenant, label_budget={"budget": budget, "strategy": "const"})
    preds = predict_all(client, tenant, np.ones((n, 3)))
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    fields = {"values": np.array([1.0]), "variance": np.array(np.nan)}

    async def two_batches() -> list[Any]:
        view = await ctx.store.models.view("acme", "m1")
        halves = [[(p["event_id"], fields) for p in preds[s::2]] for s in (0, 1)]
        done = await asyncio.gather(*(take_open_many(ctx, view, get_task("regression"), half)
                                      for half in halves))
        return [*done[0], *done[1]]

    results = client.portal.call(two_batches)  # type: ignore[union-attr]
    assert {status for status, _ in results} <= {"ok", "open"}
    asked = sum(more.get("more_labels", 0) for _, more in results)
    state = client.get("/v1/models/m1/label-budget", headers=tenant).json()
    assert state["rounds"] == n and state["labels_used"] == n + asked
    assert state["labels_used"] <= budget * n
