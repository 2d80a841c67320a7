"""The client's apprentice mode and deferred decisions against the real service."""

from __future__ import annotations

import pytest
from noisyloop_client import AsyncClient, Client, NoisyloopError

from tests.client.conftest import Service


def test_defer_activate_and_apprentice_mode(client: Client) -> None:
    client.create_model("m1", "label", 3, algorithm="linucb_diag", n_classes=3, seed=0,
                        mode="apprentice")
    served = client.predict("m1", [1.0, 0.0, 0.0], baseline=2, defer=True)
    assert (served["label"], served["probability"]) == (2, 1.0)
    with pytest.raises(NoisyloopError) as info:
        client.feedback("m1", served["event_id"], click=True)
    assert (info.value.status, info.value.code) == (409, "not_activated")
    assert client.activate("m1", served["event_id"])["event_id"] == served["event_id"]
    assert client.feedback("m1", served["event_id"], click=True) == {"accepted": True}
    batch = client.predict_batch("m1", [[0.0, 1.0, 0.0]] * 2, baseline=[1, 0])
    assert [p["label"] for p in batch] == [1, 0]
    model = client.get_model("m1")
    assert model["mode"] == "apprentice" and model["apprentice"]["events"] == 1
    assert client.set_mode("m1", "online")["mode"] == "online"
    with pytest.raises(NoisyloopError) as info:
        client.set_mode("m1", "offline")
    assert (info.value.status, info.value.field) == (422, "mode")


async def test_async_client_ranks_a_baseline_and_activates(service: Service,
                                                           api_key: str) -> None:
    async with AsyncClient(service.url, api_key) as ac:
        await ac.create_model("feed", "rank", 3, n_action_features=2, slots=2, seed=0,
                              mode="apprentice")
        actions = [{"id": f"item-{i}", "features": [float(i), 1.0]} for i in range(3)]
        ranked = await ac.rank("feed", [1.0, 0.0, 0.5], actions,
                               baseline=["item-2", "item-0"], defer=True)
        assert [r["id"] for r in ranked["ranking"]] == ["item-2", "item-0"]
        assert (await ac.activate("feed", ranked["event_id"]))["active"] is True
        await ac.set_mode("feed", "online")
        assert (await ac.get_model("feed"))["mode"] == "online"
