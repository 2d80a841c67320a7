"""No model stalls another, and model changes lose nothing, through the service with its
in-process trainer at its real batch sizes (1,000, growing to 8,000 under a backlog)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import numpy as np
import pytest
import redis

from app.store import ModelKeys, Store
from app.store.delivery import DeliveryStore
from app.store.leases import LeaseStore
from tests.api.conftest import make_client, new_model, new_tenant, predict_all

#: Longest a test waits for the trainer (generous: the machine may be busy).
WAIT = 60


def feed(api: Any, auth: dict[str, str], n: int, seed: int = 0) -> int:
    """Predict ``n`` decisions of m1 and post a click for each; returns the accepted."""
    X = np.random.default_rng(seed).standard_normal((n, 4))
    accepted = 0
    for preds in _chunks(predict_all(api, auth, X), 1000):
        r = api.post("/v1/models/m1/feedback", headers=auth, json={
            "events": [{"event_id": p["event_id"], "click": True} for p in preds]})
        assert r.status_code == 202, r.text
        accepted += r.json()["accepted"]
    return accepted


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def sync(api: Any, auth: dict[str, str], timeout: float = WAIT) -> Any:
    return api.post("/v1/models/m1/sync", params={"timeout": timeout}, headers=auth)


def stats(api: Any, auth: dict[str, str]) -> dict[str, Any]:
    r = api.get("/v1/models/m1", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json()["stats"])


def dead_trainer_claims(redis_url: str, mk: ModelKeys, n: int) -> None:
    """A trainer takes ``n`` entries of ``mk`` and is killed before publishing them."""
    async def run() -> None:
        store = Store.from_url(redis_url)
        assert await LeaseStore(store.redis).take_many([mk], "killed", 60_000) == [True]
        batch = await DeliveryStore(store.redis).read_batch(mk, "killed", n)
        assert batch is not None and len(batch) == n
        await store.redis.delete(mk.lease)  # its lease expires
        await store.close()
    asyncio.run(run())


@pytest.mark.slow
def test_16000_pending_entries_of_one_model_stall_no_other_tenants_model(
        redis_url: str) -> None:
    with make_client(redis_url, trainer=False) as api:
        a, b = new_tenant(api, "a"), new_tenant(api, "b")  # a's model steps first
        new_model(api, a)
        new_model(api, b)
        assert feed(api, a, 16_000) == 16_000
    dead_trainer_claims(redis_url, ModelKeys("a", "m1"), 16_000)
    with make_client(redis_url) as api:
        # reads of 1,000, 2,000 and 4,000; then 8,000 claimed in one Lua step
        for _ in range(WAIT * 10):
            if stats(api, a)["events_applied"] >= 7_000:
                break
            threading.Event().wait(0.1)
        assert feed(api, b, 10, seed=1) == 10
        r = sync(api, b)
        assert r.status_code == 200, r.text
        assert stats(api, b)["events_applied"] == 10
        r = sync(api, a)
        assert r.status_code == 200 and r.json()["pending"] == 0, r.text
        s = stats(api, a)
        assert s["events_applied"] == 16_000 and s["events_dead_lettered"] == 0
        assert s["trainer_error"] is None


@pytest.mark.slow
def test_a_model_failing_every_step_is_reported_and_other_tenants_keep_learning(
        redis_url: str) -> None:
    raw = redis.Redis.from_url(redis_url)
    mk = ModelKeys("a", "m1")
    with make_client(redis_url) as api:
        a, b = new_tenant(api, "a"), new_tenant(api, "b")
        new_model(api, a)
        new_model(api, b)
        X = np.random.default_rng(0).standard_normal((30, 4))
        ids = [p["event_id"] for p in predict_all(api, a, X)]
        state = raw.hget(mk.snapshot, "state")
        raw.hset(mk.snapshot, "state", b"corrupt")  # a's steps fail from now on
        r = api.post("/v1/models/m1/feedback", headers=a,
                     json={"events": [{"event_id": e, "click": True} for e in ids]})
        assert r.status_code == 202 and r.json()["accepted"] == 30
        for round_ in range(3):
            assert feed(api, b, 20, seed=round_) == 20
            r = sync(api, b)
            assert r.status_code == 200, r.text
            assert stats(api, b)["events_applied"] == 20 * (round_ + 1)
        error = stats(api, a)["trainer_error"]
        assert error is not None and error["error"].startswith("CodecError"), error
        assert error["failed_steps"] >= 1
        r = sync(api, a, timeout=0.5)
        assert r.status_code == 504 and "the trainer fails on this model" in r.text, r.text
        raw.hset(mk.snapshot, "state", state)  # repaired: retried within 30 s
        r = sync(api, a, timeout=WAIT)
        assert r.status_code == 200 and r.json()["pending"] == 0, r.text
        s = stats(api, a)
        assert s["events_applied"] == 30 and s["trainer_error"] is None


#: Successful resets, rollbacks and imports each (and feed-and-sync rounds of the other
#: tenant) the churn runs for, in a tight loop while feedback flows.
CHURN_CHANGES = 10
#: Longest the churn may take to get there (generous: the machine may be busy).
CHURN_SECONDS = 60.0


@pytest.mark.slow
def test_resets_rollbacks_imports_in_a_loop_lose_no_event_and_stall_no_other_tenant(
        redis_url: str) -> None:
    with make_client(redis_url) as api:
        a, b = new_tenant(api, "a"), new_tenant(api, "b")
        new_model(api, a)
        new_model(api, b)
        state = api.get("/v1/models/m1/snapshot", headers=a).json()["state"]
        stop = threading.Event()
        changes: Counter[tuple[str, int]] = Counter()
        accepted = {"a": 0}

        def change_a() -> None:
            while not stop.is_set():
                changes["reset", api.post("/v1/models/m1/reset", headers=a).status_code] += 1
                oldest = api.get("/v1/models/m1/versions", headers=a).json()["versions"][-1]
                changes["rollback", api.post("/v1/models/m1/rollback", headers=a, json={
                    "version": oldest["version"]}).status_code] += 1
                changes["import", api.put("/v1/models/m1/snapshot", headers=a,
                                          json={"state": state}).status_code] += 1

        def feed_a() -> None:
            i = 0
            while not stop.is_set():
                accepted["a"] += feed(api, a, 500, seed=i)
                i += 1

        threads = [threading.Thread(target=change_a), threading.Thread(target=feed_a)]
        for t in threads:
            t.start()
        accepted_b, checks = 0, 0
        started = time.monotonic()

        def churned() -> bool:
            return checks >= CHURN_CHANGES and min(
                changes[op, 200] for op in ("reset", "rollback", "import")) >= CHURN_CHANGES

        try:
            while not churned() and time.monotonic() - started < CHURN_SECONDS:  # b learns
                accepted_b += feed(api, b, 50, seed=10_000 + checks)
                r = sync(api, b)
                assert r.status_code == 200, r.text
                assert stats(api, b)["events_applied"] == accepted_b
                checks += 1
        finally:
            stop.set()
            for t in threads:
                t.join()
        applied_during = stats(api, a)["events_applied"]
        r = sync(api, a)
        assert r.status_code == 200 and r.json() == {
            "version": r.json()["version"], "pending": 0, "dead_lettered": 0}, r.text
        s = stats(api, a)
        assert s["events_applied"] == s["feedback_accepted"] == accepted["a"]
        assert s["events_dead_lettered"] == s["dead_letters_dropped"] == 0
        assert set(changes) <= {(op, status) for op in ("reset", "rollback", "import")
                                for status in (200, 409, 503)}, changes
        done = {op: changes[op, 200] for op in ("reset", "rollback", "import")}
        assert min(done.values()) >= CHURN_CHANGES and checks >= CHURN_CHANGES, (changes, checks)
        print(f"model changes in {time.monotonic() - started:.0f} s: {dict(changes)}; a: "
              f"{accepted['a']} accepted, {applied_during} applied when the changes stopped, "
              f"all applied once after; b: {checks} feed-and-sync rounds, {accepted_b} events")
