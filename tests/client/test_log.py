"""The client's log(): the decision log as dicts over its pages (sync and async)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import numpy as np
import pytest
from noisyloop_client import AsyncClient, Client, NoisyloopError, calls

from tests.client.conftest import Service

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow


def feed(client: Client, n: int, seed: int) -> list[str]:
    """``n`` applied label decisions with feedback; their event ids in order."""
    X = np.random.default_rng(seed).standard_normal((n, 4))
    preds = client.predict_batch("m1", X)
    client.feedback_batch("m1", [{"event_id": p["event_id"], "click": p["label"] == 0}
                                 for p in preds])
    assert client.sync("m1", timeout=30)["pending"] == 0
    return [p["event_id"] for p in preds]


def test_log_iterates_the_pages_in_either_order_within_a_window_and_a_limit(
        client: Client, service: Service, api_key: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    client.create_model("m1", "label", 4, algorithm="rcnbf", n_classes=3, seed=0)
    first = feed(client, 30, 0)
    time.sleep(0.01)
    until = repr(time.time())
    time.sleep(0.01)
    second = feed(client, 20, 1)
    served = httpx.get(f"{service.url}/v1/models/m1/log",
                       headers={"Authorization": f"Bearer {api_key}"}).content
    monkeypatch.setattr(calls, "LOG_PAGE", 7)  # 8 pages of the 50 events
    pages = list(client.log_pages("m1"))
    assert len(pages) == 8 and b"".join(pages) == served
    records = list(client.log("m1"))
    assert records == calls.log_records(served)
    assert [r["event_id"] for r in records] == first + second
    assert all(r["model_version"] >= 1 and "action" in r for r in records)
    newest = [r["event_id"] for r in client.log("m1", order="desc", limit=12)]
    assert newest == (first + second)[::-1][:12]
    assert [r["event_id"] for r in client.log("m1", until=until)] == first
    assert [r["event_id"] for r in client.log("m1", since=until, order="desc")
            ] == second[::-1]
    assert list(client.log("m1", since="9999-01-01")) == []
    with pytest.raises(NoisyloopError) as bad:
        next(client.log("m1", since="soon"))
    assert (bad.value.status, bad.value.field) == (422, "since")
    with pytest.raises(NoisyloopError) as bad:
        next(client.log("nope"))
    assert bad.value.code == "unknown_model"

    async def read_async() -> list[dict[str, Any]]:
        async with AsyncClient(service.url, api_key) as aclient:
            return [r async for r in aclient.log("m1", order="desc", limit=20)]

    assert asyncio.run(read_async()) == records[::-1][:20]
