"""A task added by the tests alone is served, learned, logged and evaluated end to end.

The ``thumbs`` task (:mod:`tests.tasks.thumbs`, its learner in
:mod:`tests.tasks.thumbs_learner`, which its ``Task`` declares) is registered the way a
task of the project is, with one line: :func:`app.tasks.register_task` adds it to
:data:`app.tasks.TASKS` and its learner to :data:`app.learners.registry.ALGORITHMS`
(both restored after each test); the real service then
creates its model, decides, takes its feedback, the trainer learns from it, the decision
log holds it, and the worker's jobs role evaluates the log with the task's own log shape
and estimator.  No file of the API, the evaluation or the workers names it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from app.learners import registry
from app.tasks import TASKS, register_task
from tests.api.conftest import TestClient, make_client, new_tenant
from tests.api.test_evaluations import run_jobs
from tests.tasks import thumbs, thumbs_learner

ROOT = Path(__file__).resolve().parents[2]
#: Every file the task needed: its module, its learner and its tests.
NEEDED = ("tests/tasks/thumbs.py", "tests/tasks/thumbs_learner.py", "tests/tasks/test_thumbs.py")
#: Where a task of a new shape must not have to be named.
UNTOUCHED = ("app", "workers")
#: Decisions of the end-to-end round, and the share of thumbs up the users give.
ROUNDS, UP_RATE = 120, 0.7


@pytest.fixture
def registered() -> Iterator[None]:
    """``thumbs`` registered, with its learner; the registries as they were afterwards."""
    kept = [(table, dict(table)) for table in (TASKS, registry.ALGORITHMS)]
    register_task(thumbs.TASK)  # the task's one registry line
    yield
    for table, entries in kept:
        table.clear()
        table.update(entries)


@pytest.fixture
def thumbs_client(redis_url: str, registered: None) -> Iterator[TestClient]:
    """The service (with its in-process trainer) serving the ``thumbs`` task too."""
    with make_client(redis_url) as client:
        yield client


def test_one_line_registers_the_task_and_its_learner(registered: None) -> None:
    assert list(TASKS)[-1] == thumbs.NAME
    assert registry.algorithms(thumbs.NAME) == ["guess"]
    assert registry.learner_class(thumbs.NAME, "guess") is thumbs_learner.ThumbsGuess
    with pytest.raises(ValueError, match="already registered"):
        register_task(thumbs.TASK)


def test_the_task_needed_only_its_own_files() -> None:
    sources = {inspect.getsourcefile(obj) for obj in (
        thumbs.ThumbsFeedback, thumbs.ThumbsPrediction, thumbs.ThumbsShape,
        thumbs.ThumbsSums, thumbs_learner.ThumbsGuess)}
    sources.add(__file__)
    assert sorted(str(Path(s).relative_to(ROOT)) for s in sources if s) == sorted(NEEDED)
    named = [str(path.relative_to(ROOT)) for package in UNTOUCHED
             for path in (ROOT / package).rglob("*.py") if "thumbs" in path.read_text("utf-8")]
    assert named == []


def play(client: TestClient, auth: dict[str, str]) -> list[dict[str, Any]]:
    """``ROUNDS`` decisions, each answered by a thumb (up with ``UP_RATE``); the decisions
    with the thumb they got."""
    rng = np.random.default_rng(7)
    played = []
    for _ in range(ROUNDS):
        r = client.post("/v1/models/t1/predict", headers=auth, json={"features": [0.5, -0.5]})
        assert r.status_code == 200, r.text
        decided = r.json()
        assert set(decided) == {"event_id", "model_version", "thumb", "probability"}
        thumb = "up" if rng.random() < UP_RATE else "down"
        r = client.post("/v1/models/t1/feedback", headers=auth,
                        json={"event_id": decided["event_id"], "thumb": thumb})
        assert r.status_code == 202, r.text
        played.append({**decided, "got": thumb})
    assert client.post("/v1/models/t1/sync", headers=auth).status_code == 200
    return played


def evaluate(client: TestClient, auth: dict[str, str], redis_url: str,
             policy: str) -> dict[str, Any]:
    r = client.post("/v1/models/t1/evaluations", headers=auth, json={"policy": policy})
    assert r.status_code == 202, r.text
    assert run_jobs(redis_url) >= 1
    job = client.get(f"/v1/models/t1/evaluations/{r.json()['job_id']}", headers=auth).json()
    assert job["status"] == "done", job
    result: dict[str, Any] = job
    return result


def test_serve_learn_log_and_evaluate_a_task_defined_in_the_tests(
        thumbs_client: TestClient, redis_url: str) -> None:
    client = thumbs_client
    auth = new_tenant(client)
    r = client.post("/v1/models", headers=auth, json={
        "model_id": "t1", "task": "thumbs", "n_features": 2,
        "seed": 3, "params": {"prior": 2.0, "epsilon": 0.5}})
    assert r.status_code == 201, r.text
    assert r.json()["algorithm"] == "guess"
    assert r.json()["evaluation_policies"] == ["uniform", "logging"]
    played = play(client, auth)

    # learned: the trainer applied every thumb; the greedy guess follows the majority
    assert client.get("/v1/models/t1", headers=auth).json()["stats"]["events_applied"] == ROUNDS
    ups = sum(p["got"] == "up" for p in played)
    greedy = client.post("/v1/models/t1/predict", headers=auth,
                         json={"features": [0.5, -0.5], "explore": False}).json()
    assert greedy["thumb"] == ("up" if (ups + 2.0) / (ROUNDS + 4.0) >= 0.5 else "down")

    # logged: one line per decision, with the guess, its probability and the thumb
    r = client.get("/v1/models/t1/log", headers=auth)
    assert r.status_code == 200, r.text
    lines = [orjson.loads(line) for line in r.content.splitlines()]
    events = {line["event_id"]: line for line in lines if line["type"] == "event"}
    assert len(events) == ROUNDS
    for p in played:
        line = events[p["event_id"]]
        assert (line["action"], line["propensity"], line["feedback"]["up"]) == (
            thumbs.THUMBS.index(p["thumb"]), p["probability"], float(p["got"] == "up"))

    # evaluated by the task's own estimator: its numbers are the module docstring's formulas
    # on the played rounds (sums of the same float terms in another order: 1e-12 relative)
    hit = np.array([p["thumb"] == p["got"] for p in played], dtype=float)
    prob = np.array([p["probability"] for p in played])
    expected = {"uniform": {"ips": float(np.mean(0.5 / prob * hit)), "full": 0.5},
                "logging": {"ips": float(np.mean(hit)),
                            "full": float(np.mean(np.where(hit == 1.0, prob, 1.0 - prob)))}}
    checked = []
    for policy, values in expected.items():
        result = evaluate(client, auth, redis_url, policy)
        assert (result["n"], result["policy"], result["log"]) == (
            ROUNDS, policy, "decision log of t1")
        for name, value in values.items():
            assert result[name]["value"] == pytest.approx(value, rel=1e-12), (policy, name)
            low, high = result[name]["ci"]
            assert low <= result[name]["value"] <= high
            checked.append((policy, name))
    assert len(checked) == 4


def test_task_feedback_and_policies_are_refused_naming_their_field(
        thumbs_client: TestClient) -> None:
    auth = new_tenant(thumbs_client)
    assert thumbs_client.post("/v1/models", headers=auth, json={
        "model_id": "t1", "task": "thumbs", "n_features": 2}).status_code == 201
    decided = thumbs_client.post("/v1/models/t1/predict", headers=auth,
                                 json={"features": [0.0, 1.0]}).json()
    r = thumbs_client.post("/v1/models/t1/feedback", headers=auth,
                           json={"event_id": decided["event_id"], "thumb": "sideways"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "thumb", r.text
    r = thumbs_client.post("/v1/models/t1/evaluations", headers=auth, json={"policy": "model"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "policy", r.text
    r = thumbs_client.post("/v1/models", headers=auth, json={
        "model_id": "t2", "task": "thumbs", "n_features": 2, "n_classes": 3})
    assert r.status_code == 422 and r.json()["error"]["field"] == "n_classes", r.text
