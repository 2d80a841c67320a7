"""Personalizer's routes never answer 500: random JSON bodies, and random feature objects in
otherwise valid ranks, get 201/204 or a Personalizer-shaped 4xx naming what is wrong."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import TestClient, new_tenant

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=300), inner,
                                                                 max_size=4),
    max_leaves=12)
#: A feature object: text keys (the empty one and ones past the name limit included).
FEATURES = st.lists(st.dictionaries(st.text(max_size=300), JSON, max_size=4), max_size=3)
ROUTES = ("/v1/models/loop/personalizer/rank",
          "/v1/models/loop/personalizer/v1.0/events/e/reward",
          "/v1/models/loop/personalizer/events/e/activate")

CONFIGURATION = "/v1/models/loop/personalizer/configurations/service"
MODEL = "/v1/models/loop/personalizer/model"


def _check(r: Any) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        error = r.json()["error"]
        assert isinstance(error["code"], str) and error["message"], error


def test_random_bodies_and_features_never_answer_500(client: TestClient) -> None:
    auth = {"Ocp-Apim-Subscription-Key": new_tenant(client)["Authorization"].split()[1]}
    r = client.post("/v1/models", json={"model_id": "loop", "preset": "personalizer"},
                    headers={"Authorization": f"Bearer {auth['Ocp-Apim-Subscription-Key']}"})
    assert r.status_code == 201, r.text
    checked: list[int] = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(route=st.sampled_from(ROUTES), body=JSON, context=FEATURES, action=FEATURES)
    def run(route: str, body: Any, context: Any, action: Any) -> None:
        _check(client.post(route, json=body, headers=auth))
        _check(client.put(CONFIGURATION, json=body, headers=auth))
        _check(client.put(MODEL, json=body, headers=auth))
        _check(client.post(ROUTES[0], headers=auth, json={
            "contextFeatures": context, "actions": [{"id": "a", "features": action}]}))
        checked.append(1)

    run()
    assert len(checked) == 150
