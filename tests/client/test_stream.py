"""WebSocket sessions against the live service: pipelining, in-order answers, errors, auth."""

from __future__ import annotations

import asyncio

import pytest
from noisyloop_client import AsyncStream, Client, NoisyloopError, Stream

from tests.client.conftest import Service


@pytest.fixture
def model(client: Client) -> str:
    client.create_model("ws1", "label", 4, algorithm="rcnbf", n_classes=3, seed=0)
    return "ws1"


@pytest.mark.slow
async def test_async_stream_many_in_flight(service: Service, api_key: str, client: Client,
                                           model: str) -> None:
    async with await AsyncStream.connect(service.url, api_key, model) as s:
        preds = await asyncio.gather(*(s.predict([float(i % 4 == j) for j in range(4)])
                                       for i in range(40)))
        ids = {p["event_id"] for p in preds}
        assert len(ids) == 40
        acks = await asyncio.gather(*(s.feedback(p["event_id"], click=p["label"] == 0)
                                      for p in preds))
        assert all(a == {"accepted": True} for a in acks)
        with pytest.raises(NoisyloopError) as info:
            await s.feedback(preds[0]["event_id"], click=True)
        assert info.value.code == "duplicate_feedback" and info.value.status == 409
        # the socket survives an error
        batch = await s.predict_batch([[1.0, 0, 0, 0]] * 3)
        assert len(batch) == 3
    assert client.sync(model)["pending"] == 0
    assert client.get_model(model)["stats"]["events_applied"] == 40


def test_sync_stream_pipeline_keeps_order(service: Service, api_key: str, model: str) -> None:
    with Stream.connect(service.url, api_key, model, header_auth=False) as s:
        messages: list[tuple[str, dict[str, object]]] = [
            ("predict", {"features": [1.0, 0.0, 0.0, 0.0]}) for _ in range(30)]
        messages.insert(7, ("predict", {"features": [1.0]}))  # wrong length: 422 in place
        out = s.pipeline(messages, window=8)
        assert len(out) == 31
        assert isinstance(out[7], NoisyloopError) and out[7].field is not None
        good = [o for i, o in enumerate(out) if i != 7]
        assert all("event_id" in o for o in good)
        assert s.feedback(good[0]["event_id"], click=True) == {"accepted": True}


def test_stream_bad_key_raises(service: Service, model: str) -> None:
    with pytest.raises(NoisyloopError) as info, \
            Stream.connect(service.url, "not-a-key", model) as s:
        s.predict([1.0, 0.0, 0.0, 0.0])
    assert info.value.code == "unauthenticated" and info.value.status == 401


async def test_rank_over_both_streams(service: Service, api_key: str, client: Client) -> None:
    client.create_model("wsr", "rank", 2, n_action_features=1, slots=2, seed=0)
    actions = [{"id": c, "features": [float(i)]} for i, c in enumerate("abc")]
    async with await AsyncStream.connect(service.url, api_key, "wsr") as s:
        ranked = await s.rank([1.0, 0.0], actions)
        batch = await s.rank_batch([{"features": [1.0, 0.0], "actions": actions}] * 2)
        assert len(ranked["ranking"]) == 2 and len(batch) == 2
        assert await s.feedback(ranked["event_id"], clicks=[ranked["ranking"][1]["id"]]) == {
            "accepted": True}
    with Stream.connect(service.url, api_key, "wsr") as sync_stream:
        one = sync_stream.rank([1.0, 0.0], actions, slots=1)
        assert [r["slot"] for r in one["ranking"]] == [0]
        assert sync_stream.feedback(one["event_id"], rewards={one["ranking"][0]["id"]: 0.3}) == {
            "accepted": True}
