"""Events the trainer cannot apply, through the real service: visible in the stats, the
metric, sync and the dead-letter list; dropped or retried by their owner."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import orjson
import pytest
import redis

from app.learners.base import stack_events
from app.learners.build import build_learner
from app.learners.config import ModelConfig
from app.store import ModelKeys, Store, codec, paging
from app.store.delivery import DeliveryStore
from tests.api.conftest import ADMIN, TestClient, follow_pages, new_model, post_feedback

FEATURES = [1.0, 0.5, -0.5, 0.25]


def stats(client: TestClient, auth: dict[str, str]) -> dict[str, object]:
    stats: dict[str, object] = client.get("/v1/models/m1", headers=auth).json()["stats"]
    return stats


def metric(client: TestClient) -> float:
    """``noisyloop_events_dead_lettered_total`` of acme/m1 (0 when not exported yet)."""
    found = re.search(r'^noisyloop_events_dead_lettered_total\{model="m1",tenant="acme"\} (\S+)$',
                      client.get("/metrics", headers=ADMIN).text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def click(client: TestClient, auth: dict[str, str]) -> str:
    """Predict once and send a click for it; returns the event id."""
    eid: str = client.post("/v1/models/m1/predict", json={"features": FEATURES},
                           headers=auth).json()["event_id"]
    assert post_feedback(client, auth, {"event_id": eid, "click": True}).status_code == 202
    return eid


@pytest.mark.slow
def test_poisoned_event_is_visible_everywhere_and_drop_removes_it(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant)
    click(client, tenant)
    # an entry the trainer cannot decode, as a damaged or foreign writer would leave it
    stream_id = redis.Redis.from_url(redis_url).xadd(
        ModelKeys("acme", "m1").events,
        {"k": "feedback", "e": "poison", "c": b"junk", "f": codec.encode({"click": np.array(1.0)})})
    click(client, tenant)
    r = client.post("/v1/models/m1/sync", headers=tenant)
    assert r.status_code == 200 and r.json()["pending"] == 1 and r.json()["dead_lettered"] == 1
    s = stats(client, tenant)
    assert s["events_applied"] == 2 and s["events_dead_lettered"] == 1
    assert s["dead_letters_dropped"] == 0
    assert metric(client) == 1.0
    page = client.get("/v1/models/m1/dead-letters", headers=tenant).json()
    assert page["total"] == 1 and page["next_after"] is None
    [letter] = page["dead_letters"]
    assert letter["stream_id"] == stream_id.decode() and letter["event_id"] == "poison"
    assert letter["kind"] == "feedback" and letter["reason"].startswith("malformed entry")
    assert letter["feedback"] == {"click": 1.0} and letter["fields"] is None
    assert letter["deliveries"] == 1 and letter["dead_lettered_at"].endswith("+00:00")

    r = client.delete(f"/v1/models/m1/dead-letters/{letter['entry_id']}", headers=tenant)
    assert r.status_code == 204
    r = client.delete(f"/v1/models/m1/dead-letters/{letter['entry_id']}", headers=tenant)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_dead_letter"
    assert client.get("/v1/models/m1/dead-letters", headers=tenant).json()["total"] == 0
    s = stats(client, tenant)
    assert s["events_dead_lettered"] == 0 and s["dead_letters_dropped"] == 1
    r = client.post("/v1/models/m1/sync", headers=tenant)
    assert r.json()["pending"] == 0 and r.json()["dead_lettered"] == 0
    r = client.post("/v1/models/m1/dead-letters/not-an-id/retry", headers=tenant)
    assert r.status_code == 422 and r.json()["error"]["field"] == "entry_id"


@pytest.mark.slow
def test_list_pages_and_drop_all(client: TestClient, tenant: dict[str, str],
                                 redis_url: str) -> None:
    new_model(client, tenant)
    r = redis.Redis.from_url(redis_url)
    for i in range(5):
        r.xadd(ModelKeys("acme", "m1").events, {"k": "feedback", "e": f"bad{i}"})
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 5
    seen, after = [], None
    while True:
        params = {"limit": 2, **({"after": after} if after else {})}
        page = client.get("/v1/models/m1/dead-letters", params=params, headers=tenant).json()
        seen += [d["event_id"] for d in page["dead_letters"]]
        after = page["next_after"]
        if after is None:
            break
    assert seen == [f"bad{i}" for i in range(5)]
    r2 = client.delete("/v1/models/m1/dead-letters", headers=tenant)
    assert r2.status_code == 200 and r2.json() == {"dropped": 5}
    s = stats(client, tenant)
    assert s["events_dead_lettered"] == 0 and s["dead_letters_dropped"] == 5
    assert client.get("/v1/models/m1/dead-letters", params={"limit": 0},
                      headers=tenant).status_code == 422


@pytest.mark.slow
def test_a_list_past_the_byte_bound_comes_back_cut_with_the_next_after(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    new_model(client, tenant)
    r = redis.Redis.from_url(redis_url)
    for i in range(7):
        r.xadd(ModelKeys("acme", "m1").events, {"k": "feedback", "e": f"bad{i}"})
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 7
    whole = client.get("/v1/models/m1/dead-letters", headers=tenant).json()["dead_letters"]
    sizes = [len(orjson.dumps(d)) for d in whole]
    bound = sizes[0] + sizes[1] + 10  # two dead letters a page (each about 300 bytes)
    monkeypatch.setattr(paging, "MAX_PAGE_BYTES", bound)
    pages = follow_pages(client, "/v1/models/m1/dead-letters", tenant, "next_after", "after",
                         limit=1000)
    for page in pages:
        assert page["total"] == 7 and 0 < len(page["dead_letters"]) <= 2
        assert len(page["dead_letters"]) == 1 or \
            sum(len(orjson.dumps(d)) for d in page["dead_letters"]) <= bound
    seen = [d for page in pages for d in page["dead_letters"]]
    assert seen == whole and len(pages) == 4  # cut by bytes, never whole, every one once


@pytest.mark.slow
def test_retry_of_a_bad_entry_comes_back_as_a_dead_letter(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant)
    redis.Redis.from_url(redis_url).xadd(ModelKeys("acme", "m1").events,
                                         {"k": "feedback", "e": "bad", "c": b"junk"})
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 1
    [letter] = client.get("/v1/models/m1/dead-letters", headers=tenant).json()["dead_letters"]
    r = client.post(f"/v1/models/m1/dead-letters/{letter['entry_id']}/retry", headers=tenant)
    assert r.status_code == 202 and r.json()["entry_id"] == letter["entry_id"]
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 1
    [again] = client.get("/v1/models/m1/dead-letters", headers=tenant).json()["dead_letters"]
    assert again["entry_id"] != letter["entry_id"] and again["event_id"] == "bad"
    assert again["stream_id"] == r.json()["stream_id"]
    assert again["reason"].startswith("malformed entry")
    assert metric(client) == 2.0 and stats(client, tenant)["events_dead_lettered"] == 1


@pytest.mark.slow
def test_retry_after_the_cause_is_gone_applies_the_event_once(
        client: TestClient, tenant: dict[str, str], redis_url: str) -> None:
    new_model(client, tenant)
    mk, r = ModelKeys("acme", "m1"), redis.Redis.from_url(redis_url)
    eid = client.post("/v1/models/m1/predict", json={"features": FEATURES},
                      headers=tenant).json()["event_id"]
    # a trainer that crashes on every delivery holds the model: the event is delivered
    # more than max_deliveries (10) times without being applied
    r.set(mk.lease, "crashing", px=60_000)
    assert post_feedback(client, tenant, {"event_id": eid, "click": True}).status_code == 202

    async def crash_ten_times() -> None:
        store = Store.from_url(redis_url)
        for _ in range(10):
            assert len(await DeliveryStore(store.redis).read_batch(mk, "crashing", 10) or []) == 1
        await store.close()

    asyncio.run(crash_ten_times())
    r.delete(mk.lease)  # the crashing trainer is gone; the service's trainer takes over
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 1
    [letter] = client.get("/v1/models/m1/dead-letters", headers=tenant).json()["dead_letters"]
    assert letter["event_id"] == eid and letter["deliveries"] == 11
    assert letter["reason"] == "delivered 11 times without being applied"
    assert letter["fields"]["x"] == [4] and letter["feedback"] == {"click": 1.0}
    assert stats(client, tenant)["events_applied"] == 0

    entry = r.xrange(mk.dead_letter)[0][1]
    event = {**codec.decode(entry[b"c"]), **codec.decode(entry[b"f"])}
    retried = client.post(f"/v1/models/m1/dead-letters/{letter['entry_id']}/retry",
                          headers=tenant)
    assert retried.status_code == 202
    assert client.post("/v1/models/m1/sync", headers=tenant).json()["pending"] == 0
    again = client.post(f"/v1/models/m1/dead-letters/{letter['entry_id']}/retry",
                        headers=tenant)
    assert again.status_code == 404 and again.json()["error"]["code"] == "unknown_dead_letter"
    s = stats(client, tenant)
    assert s["events_applied"] == 1 and s["events_dead_lettered"] == 0
    assert s["dead_letters_dropped"] == 0 and metric(client) == 1.0
    expected = build_learner(ModelConfig.from_json(r.hget(mk.meta, "config") or b""))
    expected.learn_many(stack_events([event]))
    got = codec.decode(r.hget(mk.snapshot, "state") or b"")
    for name, arr in expected.get_state().items():
        np.testing.assert_allclose(got[name], arr, rtol=1e-12, atol=1e-12)
