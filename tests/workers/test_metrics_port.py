"""A worker's metrics port serves the series to a caller with a metrics credential only."""

from __future__ import annotations

import httpx

from app.store import Store
from app.worker_settings import WorkerSettings
from workers.worker import Worker

TOKEN = "worker-metrics-token-0123456789abcdef"


async def test_metrics_port_needs_a_metrics_token(redis_url: str) -> None:
    store = Store.from_url(redis_url)
    worker = Worker(store, WorkerSettings(roles=("sweeper",), worker_id="m"), metrics_port=0,
                    metrics_tokens=[TOKEN])
    worker.metrics.feedback.labels("acme", "m1", "accepted").inc()
    try:
        await worker.start()
        url = f"http://127.0.0.1:{worker.bound_metrics_port}/metrics"
        async with httpx.AsyncClient() as client:
            for headers in ({}, {"Authorization": f"Bearer {TOKEN[:-1]}"}):
                r = await client.get(url, headers=headers)
                assert r.status_code == 401 and "acme" not in r.text
                assert r.json()["error"]["code"] == "invalid_metrics_token"
            r = await client.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200 and 'tenant="acme"' in r.text
    finally:
        await worker.close()
        await store.close()
