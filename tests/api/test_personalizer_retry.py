"""A rank whose event id could not be bound to its decision (the store failed after the
decision was logged) answers 503 and frees the id: the client's retry with the same
``eventId`` is ranked, and its reward reaches the retried decision."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from app.store.aliases import AliasStore
from tests.api.conftest import TestClient, new_tenant

RANK = "/v1/models/loop/personalizer/rank"


def test_a_rank_that_failed_to_bind_its_event_id_can_be_retried_with_it(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    token = new_tenant(client)["Authorization"].split()[1]
    auth = {"Ocp-Apim-Subscription-Key": token}
    assert client.post("/v1/models", json={"model_id": "loop", "preset": "personalizer"},
                       headers={"Authorization": f"Bearer {token}"}).status_code == 201
    body = {"contextFeatures": [{"hour": "morning"}], "eventId": "client-1",
            "actions": [{"id": a, "features": [{"kind": a}]} for a in ("news", "sport")]}
    bind = AliasStore.bind
    failures: list[str] = []

    async def fails_once(self: AliasStore, *args: Any) -> None:
        if not failures:
            failures.append("bind")
            raise redis.ConnectionError("the store went away")
        await bind(self, *args)

    monkeypatch.setattr(AliasStore, "bind", fails_once)
    failed = client.post(RANK, json=body, headers=auth)
    assert failed.status_code == 503, failed.text
    assert failures == ["bind"]
    retried = client.post(RANK, json=body, headers=auth)
    assert retried.status_code == 201, retried.text
    assert retried.json()["eventId"] == "client-1"
    rewarded = client.post("/v1/models/loop/personalizer/events/client-1/reward",
                           json={"value": 1.0}, headers=auth)
    assert rewarded.status_code == 204, rewarded.text
    # the id stays taken by the retried decision
    assert client.post(RANK, json=body, headers=auth).status_code == 409
