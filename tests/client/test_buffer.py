"""FeedbackBuffer / AsyncFeedbackBuffer against the live service: size and age flushes, rejects."""

from __future__ import annotations

import asyncio
import time

import pytest
from noisyloop_client import AsyncClient, AsyncFeedbackBuffer, Client, FeedbackBuffer

from tests.client.conftest import Service


@pytest.fixture
def events(client: Client) -> list[str]:
    client.create_model("fb1", "label", 4, algorithm="rcnbf", n_classes=3, seed=0)
    preds = client.predict_batch("fb1", [[1.0, 0.0, 0.0, 0.0]] * 25)
    return [p["event_id"] for p in preds]


@pytest.mark.slow
def test_buffer_flushes_by_size(client: Client, events: list[str]) -> None:
    with FeedbackBuffer(client, "fb1", max_events=10, max_delay=60) as buf:
        for e in events:
            buf.add(e, click=True)
        assert (buf.batches, buf.accepted, len(buf)) == (2, 20, 5)
    assert (buf.batches, buf.accepted, buf.rejected) == (3, 25, [])
    assert client.sync("fb1")["pending"] == 0
    assert client.get_model("fb1")["stats"]["events_applied"] == 25


def test_buffer_flushes_by_age_and_keeps_rejects(client: Client, events: list[str]) -> None:
    with FeedbackBuffer(client, "fb1", max_events=1000, max_delay=0.2) as buf:
        buf.add(events[0], click=True)
        buf.add(events[0], click=False)  # duplicate within the batch
        buf.add("unknown-event", click=True)
        deadline = time.monotonic() + 5
        while buf.batches == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert buf.batches == 1 and len(buf) == 0
    assert buf.accepted == 1
    assert sorted(err["code"] for _, err in buf.rejected) == ["duplicate_feedback",
                                                              "unknown_event"]


def test_buffer_refuses_bad_sizes(client: Client) -> None:
    with pytest.raises(ValueError):
        FeedbackBuffer(client, "fb1", max_events=1001)


async def test_async_buffer(service: Service, api_key: str, events: list[str]) -> None:
    async with AsyncClient(service.url, api_key) as c, \
            AsyncFeedbackBuffer(c, "fb1", max_events=20, max_delay=0.2) as buf:
        for e in events:
            await buf.add(e, click=False)
        assert buf.batches == 1
        for _ in range(100):
            if buf.batches == 2:
                break
            await asyncio.sleep(0.02)
        assert (buf.batches, buf.accepted) == (2, 25)
