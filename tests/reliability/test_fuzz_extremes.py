"""Numeric extremes through the real service and its trainer, every task and algorithm.

For each registered (task, algorithm) the service serves, hypothesis draws
model creations (extreme ``params``, dimensions and ``max_feature_norm``)
and rounds of traffic: predict (one and a batch, ``explore`` drawn),
feedback of the task's shape for the events it logged, one feedback event
and a batch.  Numbers are drawn from 1e308, -1e308, 1e-320, values whose
squares or products overflow (1.4e154, 1e150 against the largest
``max_feature_norm``), integers beyond 64 bits and beyond any float,
``NaN``/``Infinity`` tokens, long strings where numbers belong; wrong
lengths, out-of-range indices and labels.

Every request is sent twice (feedback: the same body for the two events the
repeated predict logged); the two answers must agree in status and, for
errors, in body.  No answer is a 5xx.  After the run, and after each
freshly created model's round, every model is synced and must hold: every
float array of its snapshot finite, and feedback accepted = applied + dead
letters held + dead letters dropped (nothing left unhandled after sync),
with sync's ``pending`` and the dead-letter list matching the held count.
Each algorithm also has a persistent model at the largest
``max_feature_norm`` (1e150) that takes a round of traffic in every example,
so that extreme updates accumulate.  A registered task the service does not
serve yet (model creation answers 422 naming ``task``) is skipped.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.features import MAX_FEATURE_NORM_LIMIT
from app.learners.registry import ALGORITHMS, default_params, learner_class
from app.tasks import get_task
from tests.api.conftest import TestClient, make_client
from tests.reliability.conftest import FUZZ_EXAMPLES, setup_tenant

#: Every test here starts services or processes, or runs long statistics.
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                    derandomize=True, suppress_health_check=list(HealthCheck))

#: Floats at and around the edges of double precision: overflow of squares
#: (1.4e154) and of products with large weights, subnormals, signed zeros.
EXTREME_FLOATS = [1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308, 1e-320,
                  -1e-320, 5e-324, 1.4e154, -1.4e154, 1e200, 1e154, 1e150, -1e150, 1e-160,
                  -0.0, 1e6, 1e7]
#: Integers past int64, uint64 and any float (10**400 is exact in JSON, inf as a float).
EXTREME_INTS = [2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**400, -(10**400)]
#: Strings where numbers belong: long ones, number-like ones.
NUMBER_STRINGS = ["1" * 10_000, "9" * 400, "1e308", "NaN", "-Infinity", "0x10", ""]
#: Values that pass the largest feature bound (1e150) but make products overflow.
MILD_FLOATS = [0.0, 1.0, -1.0, 0.5, 1e-320, 5e-324, 1e-160, 1e100, -1e100, 4e149, -4e149]

def mostly(valid: st.SearchStrategy[Any],
           invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` three times in four: enough requests get through to feed the learners."""
    return st.one_of(valid, valid, valid, invalid)


extreme_number = (st.sampled_from(EXTREME_FLOATS) | st.sampled_from(EXTREME_INTS)
                  | st.floats() | st.sampled_from(NUMBER_STRINGS) | st.sampled_from([True, None]))
mild_number = st.sampled_from(MILD_FLOATS) | st.floats(-1e3, 1e3) | st.integers(-3, 3)
any_number = mild_number | extreme_number
dimension = st.sampled_from([1, 2, 3, 1000, 1001, 10_000, 10_001, 1_000_000, 1_000_001, 0, -1,
                             2**63, 10**400, 1e308, 4.0, 4.5, "4", "4" * 1000, None])


def dense(n: int, number: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(number, min_size=n, max_size=n)


def features(n: int) -> st.SearchStrategy[Any]:
    """Inputs for a model of ``n`` features: dense (mild or extreme numbers, or a wrong
    length), sparse with edge indices, named, or a junk value."""
    index = st.integers(0, max(n - 1, 0)) | st.sampled_from(
        [n - 1, n, -1, 2**63, 10**400, 1.5, "0"])
    sparse = st.fixed_dictionaries({"indices": st.lists(index, max_size=4, unique_by=str),
                                    "values": st.lists(any_number, max_size=4)})
    named = st.fixed_dictionaries({"named": st.dictionaries(
        st.text(max_size=8) | st.just("k" * 5000), any_number, max_size=3)})
    odd = st.one_of(dense(n, any_number) if n <= 64 else sparse, named,
                    st.lists(any_number, max_size=3), extreme_number)
    return mostly(dense(n, mild_number) if n <= 64 else sparse, odd)


def label(k: int) -> st.SearchStrategy[Any]:
    return mostly(st.integers(0, max(k - 1, 0)), st.sampled_from(
        [k - 1, k, -1, 2**63, 10**400, 1e308, 1.0, 0.5, "1", True, None]))


click = mostly(st.booleans(),
               st.sampled_from([0, 1, 2, -1, 1.0, 0.5, "1", None, 1e308, 10**400]))


def feedback(task: str, n: int, k: int, shown: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """One feedback event of ``task``'s shape (the event id is added when it is sent)."""
    if task in ("label", "label_set"):
        return mostly(st.fixed_dictionaries({"click": click}) | st.fixed_dictionaries(
            {"label": label(k)}), st.fixed_dictionaries({"click": click, "label": label(k)}))
    if task == "regression":
        return st.fixed_dictionaries(
            {"values": mostly(st.lists(mild_number, min_size=1, max_size=3),
                              st.lists(any_number))},
            optional={"variance": mostly(st.floats(0, 10), any_number)})
    if task == "noisy_label":
        return st.fixed_dictionaries({"label": label(k)},
                                     optional={"gold": mostly(st.booleans(), extreme_number),
                                               "noisy_label": label(k)})
    if task == "noisy_input":
        copy = dense(n, mild_number) if n <= 64 else features(n)
        return st.fixed_dictionaries({"target": mostly(mild_number, extreme_number)},
                                     optional={"copies": st.lists(mostly(copy, features(n)),
                                                                  max_size=3)})
    if task == "rank":
        ids = st.sampled_from(shown or ["a"]) | st.sampled_from(["zz", "x" * 300, ""])
        return (st.fixed_dictionaries({"clicks": st.lists(ids, max_size=3)})
                | st.fixed_dictionaries({"rewards": st.dictionaries(
                    ids, mostly(st.floats(0, 1), any_number), max_size=3)}))
    if task == "continuous":
        return mostly(st.fixed_dictionaries({"reward": mild_number})
                      | st.fixed_dictionaries({"click": click},
                                              optional={"click_value": mild_number}),
                      st.fixed_dictionaries({"reward": any_number},
                                            optional={"click": click,
                                                      "click_value": any_number}))
    raise AssertionError(f"no feedback shape for task {task!r}")


class Service:
    """The API under test: every request sent twice, answers compared and counted."""

    def __init__(self, api: TestClient, auth: dict[str, str]) -> None:
        self.api = api
        self.auth = auth
        self.statuses: Counter[tuple[str, int]] = Counter()

    def send(self, kind: str, method: str, path: str, body: Any = None) -> Any:
        content = None if body is None else json.dumps(body)  # NaN/Infinity tokens included
        r = self.api.request(method, path, content=content,
                             headers={**self.auth, "Content-Type": "application/json"})
        self.statuses[kind, r.status_code] += 1
        assert r.status_code < 500, (kind, path, _short(body), r.text)
        return r

    def twice(self, kind: str, path: str, bodies: tuple[Any, Any]) -> tuple[Any, Any]:
        """POST the two bodies (the same request, or one per repeated event); the answers
        agree in status and, for errors, in body."""
        first, second = (self.send(kind, "POST", path, body) for body in bodies)
        assert first.status_code == second.status_code, (kind, path, _short(bodies[0]),
                                                         first.text, second.text)
        if first.status_code >= 400:
            assert first.json() == second.json(), (kind, path, _short(bodies[0]))
        return first, second


def _short(body: Any) -> str:
    return json.dumps(body)[:300]


def _finite_state(snapshot: dict[str, Any]) -> None:
    for name, array in snapshot["state"].items():
        values = np.load(io.BytesIO(base64.b64decode(array["data_b64"])), allow_pickle=False)
        if values.dtype.kind in "fc":
            assert np.isfinite(values).all(), (snapshot["model"]["model_id"], name)


def check_model(service: Service, model_id: str) -> dict[str, int]:
    """Sync ``model_id``; its weights are finite and every accepted event is applied or a
    dead letter (held or dropped).  Returns its stats."""
    api, auth, path = service.api, service.auth, f"/v1/models/{model_id}"
    synced = api.post(f"{path}/sync", headers=auth)
    assert synced.status_code == 200, synced.text
    stats = api.get(path, headers=auth).json()["stats"]
    held = stats["events_dead_lettered"]
    assert stats["events_expired"] == 0, stats
    assert stats["feedback_accepted"] == (stats["events_applied"] + held
                                          + stats["dead_letters_dropped"]), (model_id, stats)
    assert synced.json()["pending"] == synced.json()["dead_lettered"] == held, synced.json()
    letters = api.get(f"{path}/dead-letters", params={"limit": 1000}, headers=auth).json()
    assert letters["total"] == held and len(letters["dead_letters"]) == min(held, 1000)
    assert all(letter["reason"] for letter in letters["dead_letters"]), letters
    snapshot = api.get(f"{path}/snapshot", headers=auth)
    assert snapshot.status_code == 200, snapshot.text
    _finite_state(snapshot.json())
    return dict(stats)


class Model:
    """A created model and how to drive it: its request path and what it logs."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.id, self.task = doc["model_id"], doc["task"]
        self.n = int(doc["n_features"])
        self.k = int(doc["n_classes"] or 0)
        self.action_n = int(doc["params"].get("n_action_features") or self.n)

    @property
    def ranks(self) -> bool:
        return self.task == "rank"

    def request(self, features: Any, actions: list[Any], explore: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"features": features}
        if self.ranks:
            body["actions"] = [{"id": f"a{i}", "features": f} for i, f in enumerate(actions)]
        if explore is not None:
            body["explore"] = explore
        return body

    def batch(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        if self.ranks:
            return {"requests": requests}
        return {"instances": [r["features"] for r in requests],
                **({"explore": requests[0]["explore"]} if "explore" in requests[0] else {})}

    @property
    def decide(self) -> str:
        return f"/v1/models/{self.id}/" + ("rank" if self.ranks else "predict")

    def event_ids(self, answer: Any) -> list[str]:
        """Event ids an answer logged (one decision or a batch)."""
        doc = answer.json()
        items = doc.get("results") or doc.get("predictions") or [doc]
        return [item["event_id"] for item in items if item.get("event_id")]


def round_of_traffic(service: Service, model: Model, draw: Callable[..., Any]) -> None:
    """Decide for one input and a batch (each twice), then send feedback of the task's
    shape to both logged events (one event each, then a batch each)."""
    actions_of = st.lists(features(model.action_n), min_size=1, max_size=3)
    explore = mostly(st.sampled_from([None, None, True, False]), extreme_number)
    one = model.request(draw(features(model.n)), draw(actions_of) if model.ranks else [],
                        draw(explore))
    first, second = service.twice("decide", model.decide, (one, one))
    shown = [f"a{i}" for i in range(len(one.get("actions", [])))]
    body = draw(feedback(model.task, model.n, model.k, shown))
    if first.status_code == 200:
        ids = (model.event_ids(first), model.event_ids(second))
        if ids[0] and ids[1]:
            service.twice("feedback", f"/v1/models/{model.id}/feedback",
                          ({**body, "event_id": ids[0][0]}, {**body, "event_id": ids[1][0]}))
    if model.task == "noisy_label":  # an example without a prediction
        example = {**body, "features": one["features"]}
        service.twice("feedback", f"/v1/models/{model.id}/feedback", (example, example))

    requests = [model.request(draw(features(model.n)),
                              draw(actions_of) if model.ranks else [], one.get("explore"))
                for _ in range(draw(st.integers(1, 3)))]
    batch = model.batch(requests)
    first, second = service.twice("decide batch", model.decide, (batch, batch))
    if first.status_code != 200:
        return
    bodies = [draw(feedback(model.task, model.n, model.k, shown)) for _ in requests]
    ids = (model.event_ids(first), model.event_ids(second))
    if len(ids[0]) == len(ids[1]) == len(bodies):
        first_batch, second_batch = ({"events": [{**body, "event_id": event_id} for body,
                                                 event_id in zip(bodies, run, strict=True)]}
                                     for run in ids)
        a, b = service.twice("feedback batch", f"/v1/models/{model.id}/feedback",
                             (first_batch, second_batch))
        if a.status_code == 202:
            assert (a.json()["accepted"], a.json()["rejected"]) == (
                b.json()["accepted"], b.json()["rejected"]), (a.text, b.text)


def creation(task: str, algorithm: str) -> st.SearchStrategy[dict[str, Any]]:
    """A model creation body with extreme params, dimensions and feature bound (each maybe)."""
    names = sorted(default_params(learner_class(task, algorithm)))
    params = (st.dictionaries(st.sampled_from(names), any_number | st.lists(any_number,
                                                                            max_size=3),
                              max_size=2) if names else st.just({}))
    base: dict[str, Any] = {"task": task, "algorithm": algorithm, "n_features": 4, "seed": 0}
    if get_task(task).needs_classes:
        base["n_classes"] = 3
    optional = {"n_features": dimension, "params": params,
                "max_feature_norm": st.sampled_from([MAX_FEATURE_NORM_LIMIT, 1e-320, 5e-324,
                                                     1e308, 10**400]) | extreme_number}
    if get_task(task).needs_classes:
        optional["n_classes"] = dimension
    return st.fixed_dictionaries({}, optional=optional).map(
        lambda over: {k: v for k, v in {**base, **over}.items() if v is not None})


def create(service: Service, model_id: str, body: dict[str, Any]) -> Any:
    return service.send("create", "POST", "/v1/models", {"model_id": model_id, **body})


REGISTERED = list(ALGORITHMS)


@pytest.mark.parametrize(("task", "algorithm"), REGISTERED,
                         ids=[f"{t}-{a}" for t, a in REGISTERED])
def test_extremes_no_5xx_repeats_agree_weights_finite_events_accounted(
        redis_url: str, task: str, algorithm: str) -> None:
    with make_client(redis_url) as api:
        service = Service(api, setup_tenant(api))
        base = {"task": task, "algorithm": algorithm, "n_features": 4, "seed": 0,
                **({"n_classes": 3} if get_task(task).needs_classes else {})}
        r = create(service, "wide", {**base, "max_feature_norm": MAX_FEATURE_NORM_LIMIT})
        if r.status_code == 422 and r.json()["error"]["field"] == "task":
            pytest.skip(f"task {task!r} is not served: {r.json()['error']['message']}")
        assert r.status_code == 201, r.text
        wide = Model(r.json())
        fresh = Counter[str]()
        numbers = itertools.count()

        @SETTINGS
        @given(data=st.data())
        def run(data: st.DataObject) -> None:
            round_of_traffic(service, wide, data.draw)
            body, number = data.draw(creation(task, algorithm)), next(numbers)
            first, second = (create(service, f"x{number}{side}", body) for side in "ab")
            assert first.status_code == second.status_code, (body, first.text, second.text)
            if first.status_code != 201:
                assert first.json() == second.json(), body
                fresh["refused"] += 1
                return
            fresh["created"] += 1
            assert api.delete(f"/v1/models/x{number}b", headers=service.auth).status_code == 204
            model = Model(first.json())
            round_of_traffic(service, model, data.draw)
            check_model(service, model.id)
            assert api.delete(f"/v1/models/{model.id}", headers=service.auth).status_code == 204

        run()
        stats = check_model(service, wide.id)
        print(f"\n{task}/{algorithm}: models {dict(fresh)}, wide model {stats}, "
              f"answers {sorted(service.statuses.items())}")
