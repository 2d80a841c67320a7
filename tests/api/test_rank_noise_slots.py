"""A rank model's per-slot estimate through the service before it is published whole: the
jobs role's estimate shows its values, flagged, with each interval's width and what is too
wide; once examination passes its own gate the model's position bias is that estimate's
theta while its click-noise rates stay unpublished and flagged."""

from __future__ import annotations

import asyncio

import pytest

from app.learners.noise_publish import pack_slots
from app.sim.trust import simulated_placements
from app.store import ModelKeys, Store
from app.store.noise import NoiseRecord
from tests.api.conftest import TestClient
from tests.api.test_noise_service import _request_estimate

pytestmark = pytest.mark.slow


def append_rows(redis_url: str, requests: int, seed: int, graded: float | None = None) -> None:
    """The shown slots of ``requests`` simulated rankings (6 candidates, 3 slots, trust
    bias, ``ridge_pl``'s randomisation; relevance binary, or ``graded``) appended to model
    ``m1``'s rows, as its trainer appends them."""
    slot, prob, score, click, _ = simulated_placements(requests, seed=seed, graded=graded)

    async def run() -> None:
        store = Store.from_url(redis_url)
        try:
            await store.anchors.append(ModelKeys("acme", "m1"), prob, score,
                                       pack_slots(slot, click), {}, cap=90_000)
        finally:
            await store.close()
    asyncio.run(run())


def test_an_estimate_not_published_shows_its_values_flagged_then_its_examination(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    assert client.post("/v1/models", headers=tenant, json={
        "model_id": "m1", "task": "rank", "n_features": 3, "n_action_features": 2,
        "slots": 3, "seed": 0}).status_code == 201
    # 2,000 rankings: values for every slot, none narrow enough (theta_2 among them)
    append_rows(redis_url, 2_000, seed=0)
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["status"], estimate["reason"], estimate["theta_published"]) == (
        "insufficient_data", "interval_too_wide", False)
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["reason"], noise["rho0"], noise["source"]) == (
        "insufficient_data", "interval_too_wide", 0.0, "initial")
    assert noise["slots"] == estimate["slots"]
    assert [row["slot"] for row in noise["slots"]] == [0, 1, 2]
    for row in noise["slots"]:
        assert row["published"] == {"theta": False, "rho0": False, "rho1": False}
        for name, (low, high) in row["interval"].items():
            assert row["widths"][name] == pytest.approx(high - low)
            assert (name in row["too_wide"]) == (high - low > noise["max_width"])
    assert "theta" in noise["slots"][2]["too_wide"]
    model = client.get("/v1/models/m1", headers=tenant).json()
    assert model["position_bias"]["source"] == "insufficient_data"

    # 8,000 more: every theta interval narrow, a rho0_k one still too wide
    append_rows(redis_url, 8_000, seed=1)
    estimate = _request_estimate(client, tenant, redis_url)["estimate"]
    assert (estimate["status"], estimate["theta_published"]) == ("insufficient_data", True)
    noise = client.get("/v1/models/m1/noise", headers=tenant).json()
    assert (noise["status"], noise["source"], noise["rho0"], noise["rho1"]) == (
        "insufficient_data", "initial", 0.0, 0.0)
    assert noise["interval"] is None  # null until an estimate is published
    thetas = [row["theta"] for row in noise["slots"]]
    assert thetas == [row["theta"] for row in estimate["slots"]] and thetas[0] == 1.0
    for row in noise["slots"]:
        assert row["published"] == {"theta": True, "rho0": False, "rho1": False}
        assert "theta" not in row["too_wide"]
        assert row["bottom_fraction"] in (0.01, 0.015, 0.02, 0.025, 0.03)
    assert any("rho0" in row["too_wide"] for row in noise["slots"])
    model = client.get("/v1/models/m1", headers=tenant).json()
    assert model["position_bias"] == {"values": thetas, "source": "estimated",
                                      "calibration_unreliable": False}
    assert noise["history"] == []  # the rates were not estimated


def test_the_trainer_corrects_examination_alone_at_the_rates_in_force() -> None:
    rows = [{"slot": k, "theta": theta, "rho0": 0.3, "rho1": 0.4,
             "published": {"theta": True, "rho0": False, "rho1": False}}
            for k, theta in enumerate((1.0, 0.6, 0.3))]
    record = NoiseRecord(0.05, 0.1, "initial", slots=rows)
    alpha, beta = record.slot_affine  # type: ignore[misc]
    assert alpha == pytest.approx([0.85, 0.6 * 0.85, 0.3 * 0.85])
    assert beta == pytest.approx([0.05, 0.03, 0.015])
    assert record.published_slots is None
    whole = NoiseRecord(0.3, 0.4, "estimated", slots=[
        {**row, "published": {"theta": True, "rho0": True, "rho1": True}} for row in rows])
    assert whole.published_slots == whole.slots
    assert whole.slot_affine[1] == pytest.approx([0.3, 0.18, 0.09])  # type: ignore[index]
