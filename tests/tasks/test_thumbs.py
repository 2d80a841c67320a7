"""A task added by the tests alone is served end to end: the registry is the one table.

The ``thumbs`` task (:mod:`tests.tasks.thumbs`) is registered the way a task of the
project is, with one line in :data:`app.tasks.TASKS` and its learner in
:data:`app.learners.registry.ALGORITHMS`; the real service then creates its model,
decides, takes its feedback, and the trainer learns from it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.learners import registry
from app.tasks import TASKS
from tests.api.conftest import TestClient, make_client, new_tenant
from tests.tasks import thumbs


@pytest.fixture
def thumbs_client(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The service (with its in-process trainer) serving the ``thumbs`` task too."""
    monkeypatch.setitem(TASKS, thumbs.NAME, thumbs.TASK)
    monkeypatch.setitem(registry.ALGORITHMS, (thumbs.NAME, "share"),
                        "tests.tasks.thumbs:ThumbsShare")
    with make_client(redis_url) as client:
        yield client


def test_serve_a_task_defined_in_the_tests(thumbs_client: TestClient) -> None:
    auth = new_tenant(thumbs_client)
    r = thumbs_client.post("/v1/models", headers=auth, json={
        "model_id": "t1", "task": "thumbs", "n_features": 2, "params": {"prior": 2.0}})
    assert r.status_code == 201, r.text
    assert (r.json()["algorithm"], r.json()["params"]) == ("share", {"prior": 2.0})
    thumbs_up = [True, True, False, True]
    for up in thumbs_up:
        decided = thumbs_client.post("/v1/models/t1/predict", headers=auth,
                                     json={"features": [0.5, -0.5]})
        assert decided.status_code == 200, decided.text
        assert set(decided.json()) == {"event_id", "model_version", "up_share"}
        r = thumbs_client.post("/v1/models/t1/feedback", headers=auth, json={
            "event_id": decided.json()["event_id"], "thumb": "up" if up else "down"})
        assert r.status_code == 202, r.text
    assert thumbs_client.post("/v1/models/t1/sync", headers=auth).status_code == 200
    stats = thumbs_client.get("/v1/models/t1", headers=auth).json()["stats"]
    assert stats["events_applied"] == len(thumbs_up)
    decided = thumbs_client.post("/v1/models/t1/predict", headers=auth,
                                 json={"features": [0.5, -0.5], "explore": False})
    assert decided.json()["up_share"] == pytest.approx((3 + 2.0) / (4 + 2 * 2.0))


def test_task_feedback_is_refused_naming_its_field(thumbs_client: TestClient) -> None:
    auth = new_tenant(thumbs_client)
    assert thumbs_client.post("/v1/models", headers=auth, json={
        "model_id": "t1", "task": "thumbs", "n_features": 2}).status_code == 201
    decided = thumbs_client.post("/v1/models/t1/predict", headers=auth,
                                 json={"features": [0.0, 1.0]}).json()
    r = thumbs_client.post("/v1/models/t1/feedback", headers=auth,
                           json={"event_id": decided["event_id"], "thumb": "sideways"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "thumb", r.text
    r = thumbs_client.post("/v1/models", headers=auth, json={
        "model_id": "t2", "task": "thumbs", "n_features": 2, "n_classes": 3})
    assert r.status_code == 422 and r.json()["error"]["field"] == "n_classes", r.text
