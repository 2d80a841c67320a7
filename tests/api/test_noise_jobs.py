"""``POST .../noise/estimate``: one pending job per model, a bounded wait, an honest 504."""

from __future__ import annotations

import redis
from starlette.testclient import TestClient

from app.store import keys
from tests.api.conftest import new_model

ESTIMATE = "/v1/models/m1/noise/estimate"


def queued(redis_url: str) -> list[str]:
    with redis.Redis.from_url(redis_url, decode_responses=True) as r:
        return list(r.lrange(keys.NREST_QUEUE, 0, -1))


def set_status(redis_url: str, job_id: str, status: str) -> None:
    """What a jobs worker writes of a job it took."""
    with redis.Redis.from_url(redis_url) as r:
        r.hset(keys.ModelKeys("acme", "m1").job(job_id), "status", status)


def test_repeated_requests_share_one_pending_job(idle_client: TestClient,
                                                 tenant: dict[str, str], redis_url: str) -> None:
    new_model(idle_client, tenant)
    ids = {idle_client.post(ESTIMATE, headers=tenant).json()["job_id"] for _ in range(5)}
    r = idle_client.post(ESTIMATE, params={"wait": "true", "timeout": 0.05}, headers=tenant)
    assert r.status_code == 504 and r.json()["error"]["code"] == "estimate_timeout"
    assert "still queued" in r.json()["error"]["message"]
    assert len(ids) == 1 and len(queued(redis_url)) == 1
    (job_id,) = ids
    set_status(redis_url, job_id, "running")  # taken by a worker: still the model's job
    assert idle_client.post(ESTIMATE, headers=tenant).json()["job_id"] == job_id
    r = idle_client.post(ESTIMATE, params={"wait": "true", "timeout": 0.05}, headers=tenant)
    assert r.status_code == 504 and "is running" in r.json()["error"]["message"]
    set_status(redis_url, job_id, "done")  # finished: the next request queues a new one
    assert idle_client.post(ESTIMATE, headers=tenant).json()["job_id"] != job_id
    assert len(queued(redis_url)) == 2
    assert idle_client.delete("/v1/models/m1", headers=tenant).status_code == 204
    with redis.Redis.from_url(redis_url) as r:
        assert not r.exists(keys.ModelKeys("acme", "m1").pending_job)


def test_timeout_is_bounded(idle_client: TestClient, tenant: dict[str, str],
                            redis_url: str) -> None:
    new_model(idle_client, tenant)
    for timeout in ("0.001", "0", "-1", "301", "nan", "soon"):
        r = idle_client.post(ESTIMATE, params={"wait": "true", "timeout": timeout},
                             headers=tenant)
        assert r.status_code == 422, (timeout, r.text)
        assert r.json()["error"]["field"] == "timeout"
    assert queued(redis_url) == []
