"""GET/PUT .../noise with the estimator: its status before an estimate, the played rows it
counts, the settings it accepts and the 422s of settings that cannot work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import redis

from app.learners.noise_anchor import estimate_from_anchors
from app.learners.noise_publish import outcome
from app.store.keys import ModelKeys
from tests.api.conftest import TestClient, new_model, predict_all
from tests.api.test_rank import candidates, new_ranker

API_DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.mark.slow
def test_a_new_model_says_insufficient_data_and_counts_the_observed_plays(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (r["rho0"], r["rho1"], r["source"]) == (0.0, 0.0, "initial")
    assert (r["estimator"], r["status"], r["n_events"], r["max_width"]) == (
        "anchor", "insufficient_data", 0, 0.1)
    assert r["interval"] is None
    X = np.random.default_rng(0).standard_normal((30, 4))
    events = [{"event_id": p["event_id"], "click": bool(i % 2)}
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


def test_put_sets_and_clears_the_anchor_half_life(client: TestClient,
                                                  tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["half_life"] is None
    r = client.put("/v1/models/m1/noise", json={"half_life": 5000}, headers=tenant)
    assert r.status_code == 200 and r.json()["half_life"] == 5000.0, r.text
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["half_life"] == 5000.0
    r = client.put("/v1/models/m1/noise", json={"half_life": None}, headers=tenant)
    assert r.status_code == 200 and r.json()["half_life"] is None, r.text
    assert client.get("/v1/models/m1/noise", headers=tenant).json()["half_life"] is None
    r = client.put("/v1/models/m1/noise", json={"half_life": 0.5}, headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "half_life", r.text


def test_put_accepts_the_older_half_life_off_spelling(client: TestClient,
                                                      tenant: dict[str, str]) -> None:
    """``0`` set the default back before ``null`` did (the learners' off value); it still
    does, and a setting given with other fields stays as it was."""
    new_model(client, tenant, algorithm="linucb_diag")
    assert client.put("/v1/models/m1/noise", json={"half_life": 5000},
                      headers=tenant).status_code == 200
    r = client.put("/v1/models/m1/noise", json={"max_width": 0.05}, headers=tenant)
    assert r.status_code == 200 and r.json()["half_life"] == 5000.0, r.text
    r = client.put("/v1/models/m1/noise", json={"half_life": 0}, headers=tenant)
    assert r.status_code == 200 and r.json()["half_life"] is None, r.text


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


@pytest.mark.slow
def test_a_rank_model_has_the_per_slot_anchor_estimator_and_refuses_nrest(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    # its placements feed the per-slot estimate (app.learners.noise_slots), awaited until then
    new_ranker(client, tenant)
    stored = redis.Redis.from_url(redis_url)
    try:  # as every model that never chose one (those created before the default, too)
        assert not stored.hexists(ModelKeys("acme", "feed").noise, "estimator")
    finally:
        stored.close()
    r = client.get("/v1/models/feed/noise", headers=tenant).json()
    assert (r["estimator"], r["status"], r["source"], r["reason"], r["interval"],
            r["slots"]) == ("anchor", "insufficient_data", "initial", "too_few_events", None,
                            None)
    r = client.post("/v1/models/feed/rank", json={"features": [1.0, 0.2, -0.3], "actions": (
        candidates(5, np.random.default_rng(0)))}, headers=tenant).json()
    assert client.post("/v1/models/feed/feedback", json={
        "event_id": r["event_id"], "clicks": [r["ranking"][0]["id"]]},
        headers=tenant).status_code == 202
    assert client.post("/v1/models/feed/sync", headers=tenant).status_code == 200
    stats = client.get("/v1/models/feed", headers=tenant).json()["stats"]
    # its rates await an estimate: its calibrated reward is flagged
    assert (stats["debiased_reward"], stats["calibration_unreliable"]) == (1.0, True)
    assert r["ranking"][0]["expected_reward"] is not None
    assert client.post("/v1/models/feed/rank", json={"features": [1.0, 0.2, -0.3], "actions": (
        candidates(5, np.random.default_rng(1)))},
        headers=tenant).json()["calibration_unreliable"] is True
    r = client.put("/v1/models/feed/noise", json={"estimator": "nrest"}, headers=tenant)
    assert r.status_code == 422, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (
        "estimator_unavailable", "estimator")
    for estimator in ("anchor", "fixed"):
        r = client.put("/v1/models/feed/noise", json={"estimator": estimator}, headers=tenant)
        assert r.status_code == 200 and r.json()["estimator"] == estimator, r.text
    r = client.put("/v1/models/feed/noise", json={"rho0": 0.05, "rho1": 0.3}, headers=tenant)
    assert r.status_code == 200, r.text
    assert (r.json()["estimator"], r.json()["status"], r.json()["source"], r.json()["reason"]
            ) == ("fixed", "fixed", "configured", "")
    stats = client.get("/v1/models/feed", headers=tenant).json()["stats"]
    assert stats["calibration_unreliable"] is False


def test_a_rank_model_created_with_its_rates_is_calibrated_by_them(
        client: TestClient, tenant: dict[str, str]) -> None:
    # as a label model's: initial rates await the estimate, unless the estimator is fixed
    new_ranker(client, tenant, params={"rho0": 0.05, "rho1": 0.2})
    r = client.get("/v1/models/feed/noise", headers=tenant).json()
    assert (r["status"], r["source"], r["reason"]) == (
        "insufficient_data", "initial", "too_few_events")
    r = client.put("/v1/models/feed/noise", json={"estimator": "fixed"}, headers=tenant).json()
    assert (r["status"], r["source"], r["reason"]) == ("fixed", "initial", "")
    r = client.post("/v1/models/feed/rank", json={"features": [1.0, 0.2, -0.3], "actions": (
        candidates(5, np.random.default_rng(0)))}, headers=tenant).json()
    assert r["calibration_unreliable"] is False


def test_an_estimate_that_was_not_published_shows_no_interval(
        client: TestClient, tenant: dict[str, str]) -> None:
    """``interval`` is the published estimate's: null after a run that published nothing
    (as the docs' table of estimates says), its bounds once one is published."""
    new_model(client, tenant, algorithm="linucb_diag")
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    mk = ModelKeys("acme", "m1")
    unpublished = outcome(estimate_from_anchors(np.full(10, 0.5), np.zeros(10), np.ones(10), 3))
    assert unpublished["status"] == "insufficient_data"
    client.portal.call(ctx.store.anchors.record, mk, unpublished)  # type: ignore[union-attr]
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (r["status"], r["reason"], r["interval"]) == (
        "insufficient_data", unpublished["reason"], None), r
    published = {**unpublished, "status": "published", "reason": "", "rho0": 0.1, "rho1": 0.2,
                 "interval": {"level": 0.95, "rho0": [0.08, 0.12], "rho1": [0.17, 0.23]}}
    client.portal.call(ctx.store.anchors.record, mk, published)  # type: ignore[union-attr]
    r = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert r["interval"] == published["interval"], r


def test_the_docs_give_the_half_life_default_as_get_shows_it(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant, algorithm="linucb_diag")
    shown = client.get("/v1/models/m1/noise", headers=tenant).json()["half_life"]
    row = next(line for line in API_DOCS.read_text().splitlines()
               if line.startswith("| `PUT /v1/models/{model_id}/noise`"))
    assert f'shown as `"half_life": {json.dumps(shown)}`' in row, row
