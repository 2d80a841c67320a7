"""The fast path's hand parsers against the schemas they stand in for (hypothesis).

For any body a hand parser takes (:mod:`app.api.fastbody`; the quick click
parser of feedback events), the pydantic schema takes it too and gives the
same normal form (:class:`~app.api.decisionrequest.DecisionRequest`; the
same feedback arrays); and for any body, taken or not, the service answers
as its schema path does: same status, same error code and field.  The
bodies come from strategies aimed at the edges: numbers as JSON integers
(beyond 64 bits too), floats, ``NaN``/``Infinity`` literals, booleans,
strings and nulls; nested and ragged lists; extra, missing and misspelt
keys; unicode and over-long ids; arrays of thousands of numbers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from app.api.decisionrequest import predict_request, rank_request
from app.api.errors import ApiError
from app.api.fastbody import plain_rank_body, single_predict_body
from app.api.routing import parse_json
from app.api.schemas.predict import PredictRequest
from app.api.schemas.rank import RankBody
from app.learners.config import ModelConfig
from app.learners.registry import learner_class
from app.tasks import TASKS
from app.tasks.label import quick_click
from tests.api.conftest import TestClient, make_client, new_model, new_tenant
from tests.api.test_rank import DA, DX, new_ranker

SETTINGS = settings(max_examples=200, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
#: The route tests send each body twice through a live app: fewer examples.
ROUTE_SETTINGS = settings(SETTINGS, max_examples=100)
_RANK_BODY: TypeAdapter[Any] = TypeAdapter(RankBody)  # type: ignore[arg-type]
#: A request with an Origin header never takes the fast path (CORS is the app's business,
#: and no CORS origin is configured here, so the app answers it as any other).
_NO_FAST_PATH = {"Origin": "https://elsewhere.example"}

# -- strategies --------------------------------------------------------------------------
# A body is a plain one (what the hand parsers exist for), or a plain one with one edit at
# an edge, each kind of edit as likely (so that each is tried on a body otherwise taken,
# many times in a run), or any JSON value.


def either(*choices: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of ``choices``, each as likely (``|`` weighs by the branches within each)."""
    return st.integers(0, len(choices) - 1).flatmap(lambda k: choices[k])


numbers = either(st.integers(-10, 10), st.floats(-1e6, 1e6), st.integers(-2**70, 2**70),
                 st.floats())
#: What a number must not be, and numbers at the edges of what orjson and json read alike.
number_edges = st.sampled_from([True, False, None, "1", "nan", [1.0], {}, float("nan"),
                                float("inf"), 10**400, 10**20, 2**64, -2**63 - 1, -0.0,
                                5e-324, 1e300])
id_edges = st.sampled_from(["", "x" * 256, "x" * 257, "é漢😀", "a\x00\n", 1, None, True,
                            ["a"]])
flag_edges = st.sampled_from([True, False, 0, 1, None, "true", []])
slots_edges = st.sampled_from([0, -1, 1, 3, 4, 2.0, True, None, "2", 2**64, 2**70])
json_values = st.recursive(either(numbers, number_edges, st.text(max_size=3)),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                           max_leaves=8)
good_numbers = st.integers(-3, 3) | st.floats(-10, 10)
good_ids = st.sampled_from(["a", "b", "c", "item-1", "é漢😀"])


def dense(width: int) -> st.SearchStrategy[list[Any]]:
    """``width`` plain numbers: what a model of that width takes."""
    return st.lists(good_numbers, min_size=width, max_size=width)


def other_features(width: int) -> st.SearchStrategy[Any]:
    """Features of another kind: another length (thousands too), ragged and nested lists,
    sparse, named, any JSON value."""
    return either(
        st.lists(good_numbers, max_size=width + 2),
        st.builds(lambda n, v: [v] * n, st.integers(1000, 4000), numbers),
        st.lists(st.lists(good_numbers, max_size=width), min_size=1, max_size=3),
        st.fixed_dictionaries({"indices": st.lists(st.integers(-1, width), max_size=3),
                               "values": st.lists(numbers, max_size=3)}),
        st.fixed_dictionaries({"named": st.dictionaries(st.text(max_size=4), numbers,
                                                        max_size=2)}),
        json_values)


def _put(values: list[Any], i: int, value: Any) -> list[Any]:
    return [value if j == i % len(values) else v for j, v in enumerate(values)]


def _toggle(body: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``body`` without ``key`` if it has it, else with it (set to ``value``)."""
    return ({k: v for k, v in body.items() if k != key} if key in body
            else {**body, key: value})


def _edit_action(actions: list[Any], i: int, edit: Any) -> list[Any]:
    return [edit(a) if j == i % len(actions) else a for j, a in enumerate(actions)]


def predict_bodies() -> st.SearchStrategy[Any]:
    """Simple single predicts, with one edit or not; any JSON value now and then."""
    simple = st.fixed_dictionaries({"features": dense(4)}, optional={"explore": st.booleans()})

    def edit(body: dict[str, Any]) -> st.SearchStrategy[Any]:
        return either(
            st.just(body),
            st.builds(lambda i, v: {**body, "features": _put(body["features"], i, v)},
                      st.integers(0, 3), number_edges),
            other_features(4).map(lambda f: {**body, "features": f}),
            flag_edges.map(lambda v: {**body, "explore": v}),
            st.builds(lambda k, v: _toggle(body, k, v), st.sampled_from(
                ["x", "Features", "features", "explore", "instances", "defer", "baseline"]),
                either(flag_edges, st.just([[1, 0, 0, 0]]), st.integers(0, 3))))
    return either(simple.flatmap(edit), simple.flatmap(edit), json_values)


plain_actions = st.fixed_dictionaries({"id": good_ids, "features": dense(DA)})
plain_requests = st.fixed_dictionaries(
    {"features": dense(DX), "actions": st.lists(plain_actions, min_size=1, max_size=4)},
    optional={"slots": st.integers(1, 3), "explore": st.booleans(), "defer": st.booleans()})


def edited_request(body: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A plain rank request with one edit at an edge, or none."""
    acts = body["actions"]
    index = st.integers(0, len(acts) - 1)
    return either(
        st.just(body),
        st.builds(lambda i, v: {**body, "features": _put(body["features"], i, v)},
                  st.integers(0, DX - 1), number_edges),
        other_features(DX).map(lambda f: {**body, "features": f}),
        st.builds(lambda i, v: {**body, "actions": _edit_action(
            acts, i, lambda a: {**a, "id": v})}, index, id_edges),
        st.builds(lambda i, j, v: {**body, "actions": _edit_action(
            acts, i, lambda a: {**a, "features": _put(a["features"], j, v)})},
            index, st.integers(0, DA - 1), number_edges),
        st.builds(lambda i, f: {**body, "actions": _edit_action(
            acts, i, lambda a: {**a, "features": f})}, index, other_features(DA)),
        st.builds(lambda i, k, v: {**body, "actions": _edit_action(
            acts, i, lambda a: _toggle(a, k, v))}, index,
            st.sampled_from(["x", "id", "features", "ïd"]), good_ids),
        st.builds(lambda v: {**body, "actions": v}, either(
            st.just([]), st.just([acts[0], acts[0]]), json_values)),
        slots_edges.map(lambda v: {**body, "slots": v}),
        st.builds(lambda k, v: {**body, k: v}, st.sampled_from(["explore", "defer"]),
                  flag_edges),
        st.builds(lambda k, v: _toggle(body, k, v), st.sampled_from(
            ["x", "features", "actions", "baseline", "instances", "requests"]),
            either(st.lists(good_ids, max_size=2), json_values)))


def rank_bodies() -> st.SearchStrategy[Any]:
    """One request or a batch of 1 to 3 (one of them edited, or the batch), any JSON value."""
    one = plain_requests.flatmap(edited_request)
    batch = st.builds(lambda rs, i, r: {"requests": _put(rs, i, r)},
                      st.lists(plain_requests, min_size=1, max_size=3), st.integers(0, 2), one)
    odd_batch = either(st.just({"requests": []}), st.builds(
        lambda b, v: {**b, "x": v}, batch, json_values), json_values.map(
        lambda v: {"requests": v}))
    return either(one, one, batch, odd_batch, json_values)


def encoded(values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON as clients send it (``NaN``/``Infinity`` literals, escaped or raw unicode), and
    now and then cut short."""
    def encode(value: Any, ascii_only: bool, cut: int | None) -> bytes:
        text = json.dumps(value, ensure_ascii=ascii_only).encode()
        return text if cut is None else text[:cut]
    cut = st.integers(0, 9).flatmap(lambda k: st.integers(0, 40) if k == 0 else st.none())
    return st.builds(encode, values, st.booleans(), cut)


# -- the parsers: what the hand takes, the schema takes alike ----------------------------


@SETTINGS
@given(body=encoded(predict_bodies()))
def test_single_predict_body_takes_only_what_the_schema_takes_alike(body: bytes) -> None:
    request = single_predict_body(body)
    if request is not None:
        assert predict_request(PredictRequest.model_validate(parse_json(body))) == request


@SETTINGS
@given(body=encoded(rank_bodies()))
def test_plain_rank_body_takes_only_what_the_schema_takes_alike(body: bytes) -> None:
    request = plain_rank_body(body, 32)
    if request is not None:
        assert rank_request(_RANK_BODY.validate_python(parse_json(body))) == request


#: The model the feedback is parsed for.
CONFIG = ModelConfig.of({"model_id": "m", "task": "label", "algorithm": "rcnbf", "n_classes": 10,
                         "n_features": 4})


def _feedback(parse: Any, raw: Any, cls: type) -> Any:
    """``(event_id, {name: (dtype, shape, values)})``, or the error's status and body."""
    try:
        event_id, fields = parse(raw, CONFIG, cls, prefix="events[0]")
    except ApiError as exc:
        return exc.status, exc.body()
    return event_id, {name: (a.dtype.str, a.shape, a.tolist()) for name, a in fields.items()}


@SETTINGS
@given(raw=either(st.builds(
    lambda body, k, v: {**body, k: v} if k else body,
    st.fixed_dictionaries({"event_id": st.sampled_from(["e1", "A-b_9" * 12 + "abcd"]),
                           "click": st.booleans()}),
    st.sampled_from(["", "event_id", "click", "label", "x"]),
    either(flag_edges, st.sampled_from(["A" * 64, "A" * 65, "", "e 1", "e/1", "é"]),
           st.integers(-1, 12), json_values)), json_values))
def test_quick_click_takes_only_what_the_schema_takes_alike(raw: Any) -> None:
    cls = learner_class("label", "rcnbf")
    spec = TASKS["label"]
    quick = quick_click(raw, cls)
    if quick is not None:
        full = _feedback(replace(spec, quick_feedback=None).parse_feedback, raw, cls)
        assert full == (quick[0], {"click": ("<f8", (), float(quick[1]["click"]))})


# -- the service: a body the hand refuses is answered as the schema path answers it --------


@pytest.fixture
def service(redis_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A service with a label model ``m1`` (4 features) and a rank model ``feed``, each
    decided for once (so the fast path's caches are warm); the tenant's auth header."""
    with make_client(redis_url, trainer=False) as client:
        auth = new_tenant(client)
        new_model(client, auth)
        new_ranker(client, auth)
        assert client.post("/v1/models/m1/predict", json={"features": [1, 0, 0, 0]},
                           headers=auth).status_code == 200
        assert client.post("/v1/models/feed/rank", headers=auth, json={
            "features": [1] * DX, "actions": [{"id": "a", "features": [0] * DA}]}
        ).status_code == 200
        yield client, auth


def _answer(client: TestClient, url: str, body: bytes, headers: dict[str, str]) -> Any:
    """Status, and the error's code and field or the answer's keys (sizes of lists)."""
    r = client.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
    doc = r.json()
    if "error" in doc:
        return r.status_code, doc["error"]["code"], doc["error"]["field"]
    return r.status_code, sorted(doc), [len(v) for v in doc.values() if isinstance(v, list)]


@pytest.mark.slow
@ROUTE_SETTINGS
@given(body=encoded(predict_bodies()))
def test_predict_answers_as_the_schema_path(service: tuple[TestClient, dict[str, str]],
                                            body: bytes) -> None:
    client, auth = service
    url = "/v1/models/m1/predict"
    assert _answer(client, url, body, auth) == _answer(client, url, body,
                                                       {**auth, **_NO_FAST_PATH})


@pytest.mark.slow
@ROUTE_SETTINGS
@given(body=encoded(rank_bodies()))
def test_rank_answers_as_the_schema_path(service: tuple[TestClient, dict[str, str]],
                                         body: bytes) -> None:
    client, auth = service
    url = "/v1/models/feed/rank"
    assert _answer(client, url, body, auth) == _answer(client, url, body,
                                                       {**auth, **_NO_FAST_PATH})


@pytest.mark.slow
def test_the_strategies_reach_both_answers() -> None:
    """The hand parsers take a fair share of the generated bodies, and refuse some (else the
    properties above would be empty)."""
    taken = {"predict": [], "rank": []}  # type: dict[str, list[bool]]

    @settings(SETTINGS, max_examples=100)
    @given(predict=encoded(predict_bodies()), rank=encoded(rank_bodies()))
    def count(predict: bytes, rank: bytes) -> None:
        taken["predict"].append(single_predict_body(predict) is not None)
        taken["rank"].append(plain_rank_body(rank, 32) is not None)

    count()
    for kind, flags in taken.items():
        assert 0.05 < np.mean(flags) < 0.95, (kind, np.mean(flags))


def test_schema_and_hand_refuse_a_nan_alike() -> None:
    """A ``NaN`` literal: orjson refuses it (the hand declines), the schema refuses it."""
    body = b'{"features": [NaN, 0, 0, 0]}'
    assert single_predict_body(body) is None
    with pytest.raises(ValidationError):
        PredictRequest.model_validate(parse_json(body))
