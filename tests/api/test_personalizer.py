"""Azure AI Personalizer's SDKs against the real service (uvicorn on a free port, real Redis,
in-process trainer): both SDK generations rank, reward and activate unchanged, errors come
back as the SDKs' exceptions with the message, and a simulated world learns through them."""

from __future__ import annotations

import base64
import io
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
import redis
from azure.ai.personalizer import PersonalizerAdministrationClient
from azure.ai.personalizer import PersonalizerClient as Client
from azure.cognitiveservices.personalizer import PersonalizerClient as OldClient
from azure.cognitiveservices.personalizer.models import (
    ErrorResponseException,
    RankableAction,
)
from azure.cognitiveservices.personalizer.models import RankRequest as OldRankRequest
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError
from msrest.authentication import CognitiveServicesCredentials
from msrest.exceptions import HttpOperationError

from app.learners.config import ModelConfig
from app.store.embedded import EmbeddedRedis
from app.store.keys import ModelKeys
from tests.api.conftest import sweep
from tests.conftest import served_service
from tests.deadlines import pass_deadlines

ADMIN_TOKEN = "personalizer-test-admin-token-0123"


@dataclass(frozen=True)
class Service:
    url: str
    redis_url: str


@pytest.fixture(scope="module")
def service(redis_server: EmbeddedRedis) -> Iterator[Service]:
    with served_service(redis_server.url, ADMIN_TOKEN, "personalizer-tests") as url:
        yield Service(url, redis_server.url)


@dataclass(frozen=True)
class Loop:
    """A tenant's Personalizer loop: its key, the SDKs' endpoint, the native API."""

    tenant: str
    key: str
    endpoint: str
    api: httpx.Client

    def model(self) -> dict[str, Any]:
        r = self.api.get("/v1/models/loop")
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    def sync(self) -> None:
        assert self.api.post("/v1/models/loop/sync").status_code == 200


def _loop(service: Service, **body: Any) -> Iterator[Loop]:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    with httpx.Client(base_url=service.url, timeout=30) as admin:
        r = admin.post("/v1/admin/tenants", json={"tenant_id": tenant},
                       headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
    with httpx.Client(base_url=service.url, timeout=30,
                      headers={"Authorization": f"Bearer {key}"}) as api:
        r = api.post("/v1/models", json={"model_id": "loop", "preset": "personalizer",
                                         "seed": 0, **body})
        assert r.status_code == 201, r.text
        yield Loop(tenant, key, f"{service.url}/v1/models/loop", api)


@pytest.fixture
def loop(service: Service) -> Iterator[Loop]:
    yield from _loop(service)


def _client(loop: Loop) -> Client:
    return Client(loop.endpoint, AzureKeyCredential(loop.key))


def _old_client(loop: Loop) -> OldClient:
    return OldClient(loop.endpoint, CognitiveServicesCredentials(loop.key))


CONTEXT = [{"user": {"profile": "gold", "age": 31, "returning": True}},
           {"environment": {"daypart": "morning", "weekend": False}}]
ACTIONS = [{"id": name, "features": [{"item": {"kind": kind, "price": price}}]}
           for name, kind, price in (("news", "text", 0.0), ("sports", "video", 1.0),
                                     ("weather", "text", 0.5), ("music", "audio", 2.0))]


def test_the_preset_is_a_model_with_personalizers_defaults(loop: Loop) -> None:
    model = loop.model()
    assert model["preset"] == "personalizer"
    assert model["task"] == "rank"
    assert model["feedback"] == {"wait_seconds": 600, "on_timeout": "no_click",
                                 "aggregation": "earliest"}
    assert model["params"]["slots"] == 1
    assert model["params"]["epsilon"] == 0.2


def test_a_presets_defaults_give_way_to_the_request(service: Service) -> None:
    for made in _loop(service, n_features=8, params={"epsilon": 0.05},
                      feedback={"wait_seconds": 60, "on_timeout": "drop"}):
        model = made.model()
        assert (model["preset"], model["n_features"]) == ("personalizer", 8)
        assert model["params"]["epsilon"] == 0.05
        assert model["feedback"] == {"wait_seconds": 60, "on_timeout": "drop",
                                     "aggregation": "earliest"}
        r = made.api.post("/v1/models", json={"model_id": "other", "preset": "personaliser",
                                                "task": "rank", "n_features": 3})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "preset"


def test_rank_answers_every_action_with_its_probability(loop: Loop) -> None:
    answer = _client(loop).rank({"contextFeatures": CONTEXT, "actions": ACTIONS,
                                 "excludedActions": ["music"], "eventId": "first-event"})
    ranking = answer["ranking"]
    assert answer["eventId"] == "first-event"
    assert answer["rewardActionId"] == ranking[0]["id"]
    assert sorted(r["id"] for r in ranking) == sorted(a["id"] for a in ACTIONS)
    assert ranking[-1] == {"id": "music", "probability": 0.0}
    # every action not excluded can be chosen: 20% exploration spread over the three, and
    # the probabilities of choosing each add up to 1
    probabilities = [r["probability"] for r in ranking[:-1]]
    assert min(probabilities) >= 0.2 / 3 - 1e-12
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-9)


def test_a_reward_is_learned_exactly_once(loop: Loop) -> None:
    client = _client(loop)
    answer = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
    assert len(answer["eventId"]) == 24  # noisyloop's own event id when none is given
    client.reward(answer["eventId"], {"value": 0.75})
    client.reward(answer["eventId"], {"value": 0.0})  # earliest: ignored
    loop.sync()
    stats = loop.model()["stats"]
    assert (stats["feedback_accepted"], stats["events_applied"]) == (1, 1), stats


def test_the_older_sdk_ranks_rewards_and_activates(loop: Loop) -> None:
    client = _old_client(loop)
    request = OldRankRequest(
        context_features=CONTEXT,
        actions=[RankableAction(id=a["id"], features=a["features"]) for a in ACTIONS],
        excluded_actions=["news"], event_id="old-1", defer_activation=True)
    answer = client.rank(request)
    assert answer.event_id == "old-1"
    assert answer.reward_action_id == answer.ranking[0].id != "news"
    assert answer.ranking[-1].id == "news" and answer.ranking[-1].probability == 0.0
    client.events.reward("old-1", 1.0)  # before the activation: kept until then
    client.events.reward("old-1", 0.0)  # earliest: ignored
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 0
    client.events.activate("old-1")
    client.events.reward("old-1", 0.0)  # learned at the activation already: ignored
    loop.sync()
    stats = loop.model()["stats"]
    assert (stats["events_applied"], stats["debiased_reward"]) == (1, 1.0), stats
    with pytest.raises(HttpOperationError) as raised:
        client.events.activate("nope")
    assert "no event 'nope'" in raised.value.response.json()["error"]["message"]
    with pytest.raises(ErrorResponseException, match="eventId"):
        client.rank(request)  # the same event id again


#: How far back the deadlines move: past Personalizer's reward wait of 10 minutes.
WAIT_PASSED = 700.0


def pass_reward_wait(service: Service, loop: Loop, waiting: int = 1) -> None:
    """Move the loop's deadlines past the reward wait (``waiting`` decisions have one: a
    deferred decision has none until it is activated), sweep and sync."""
    with redis.Redis.from_url(service.redis_url) as r:
        assert pass_deadlines(r, ModelKeys(loop.tenant, "loop"), WAIT_PASSED) == waiting
    sweep(service.redis_url)
    loop.sync()


def test_an_event_without_reward_gets_the_default_reward(service: Service, loop: Loop) -> None:
    client = _client(loop)
    client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
    deferred = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS,
                            "deferActivation": True})
    pass_reward_wait(service, loop)
    stats = loop.model()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (1, 1), stats
    client.activate(deferred["eventId"])
    pass_reward_wait(service, loop)
    assert loop.model()["stats"]["events_applied"] == 2


def _learned_rewards(loop: Loop) -> list[float]:
    """The reward each event of the loop's decision log was learned with, in increasing
    order."""
    lines = [orjson.loads(line) for line in loop.api.get("/v1/models/loop/log").text.split()]
    return sorted(line["slots"][0]["click"] for line in lines if line["type"] == "event")


def test_with_sum_the_rewards_add_up_and_are_learned_once_at_the_wait(
        service: Service, loop: Loop) -> None:
    """``rewardAggregation: sum``: the rewards of an event are added up until the reward
    wait passed (the sum clipped to 1, the largest reward the rank task takes), then
    learned once; an event without reward gets the default reward 0; a reward after the
    wait is refused and changes nothing."""
    admin, client = _admin(loop), _client(loop)
    shown = admin.update_service_configuration({"rewardAggregation": "sum",
                                                "rewardWaitTime": "PT30S"})
    assert (shown["rewardAggregation"], shown["rewardWaitTime"]) == ("sum", "PT30S")
    assert loop.model()["feedback"] == {"wait_seconds": 30, "on_timeout": "no_click",
                                        "aggregation": "sum"}
    for name in ("summed", "clipped", "silent", "once"):
        client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": name})
    for name, value in (("summed", 0.25), ("clipped", 0.75), ("summed", 0.5),
                        ("clipped", 0.5), ("once", 0.125)):
        client.reward(name, {"value": value})
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 0  # open until the wait passed
    pass_reward_wait(service, loop, waiting=4)
    stats = loop.model()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (4, 4), stats
    # silent (the default), once, summed (0.25 + 0.5), clipped (0.75 + 0.5, clipped to 1)
    assert _learned_rewards(loop) == [0.0, 0.125, 0.75, 1.0]
    with pytest.raises(HttpResponseError) as raised:
        client.reward("summed", {"value": 1.0})
    assert raised.value.status_code == 404
    sweep(service.redis_url)
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 4


def test_switching_sum_off_keeps_the_rewards_added_up_so_far(
        service: Service, loop: Loop) -> None:
    """An event whose rewards were being added up when the aggregation went back to
    ``earliest`` keeps them: a later reward counts as a duplicate (earliest takes the first
    reward only) and the sum so far is learned at the wait; an event without a reward yet
    takes its first one at once."""
    admin, client = _admin(loop), _client(loop)
    admin.update_service_configuration({"rewardAggregation": "sum"})
    for name in ("summing", "first"):
        client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": name})
    for value in (0.25, 0.5):
        client.reward("summing", {"value": value})
    admin.update_service_configuration({"rewardAggregation": "earliest"})
    client.reward("summing", {"value": 0.125})
    client.reward("first", {"value": 0.375})
    pass_reward_wait(service, loop)  # "summing" alone still waits
    assert loop.model()["stats"]["events_applied"] == 2
    assert _learned_rewards(loop) == [0.375, 0.75]


def test_with_sum_concurrent_rewards_of_an_event_are_all_added(
        service: Service, loop: Loop) -> None:
    """Sixteen rewards of 1/32 sent at once from eight threads add up to 0.5 exactly (each
    reward is added with a compare-and-set step: one that meets another is retried)."""
    _admin(loop).update_service_configuration({"rewardAggregation": "sum"})
    _client(loop).rank({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": "busy"})
    with ThreadPoolExecutor(8) as pool:
        sent = list(pool.map(lambda _: _client(loop).reward("busy", {"value": 1 / 32}),
                             range(16)))
    assert len(sent) == 16
    pass_reward_wait(service, loop)
    assert _learned_rewards(loop) == [0.5]


def test_with_sum_rewards_before_the_activation_add_up_with_those_after(
        service: Service, loop: Loop) -> None:
    """A deferred event's rewards sent before its activation are kept, each one, and added
    up with those after it."""
    client = _client(loop)
    _admin(loop).update_service_configuration({"rewardAggregation": "sum"})
    client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": "later",
                 "deferActivation": True})
    client.reward("later", {"value": 0.25})
    client.reward("later", {"value": 0.125})
    client.activate("later")
    client.activate("later")  # again: nothing more is learned
    client.reward("later", {"value": 0.5})
    pass_reward_wait(service, loop)
    assert _learned_rewards(loop) == [0.875]
    assert loop.model()["stats"]["events_applied"] == 1


def test_with_sum_an_apprentice_loop_counts_each_events_summed_reward(
        service: Service, loop: Loop) -> None:
    """In apprentice mode with ``sum``, the baseline's value is the mean of the events'
    summed rewards (an event without reward counts as 0), each event counted once."""
    client = _client(loop)
    _admin(loop).update_service_configuration({"rewardAggregation": "sum",
                                               "learningMode": "Apprentice"})
    for name in ("a", "b"):
        client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": name})
    client.reward("a", {"value": 0.25})
    client.reward("a", {"value": 0.5})
    pass_reward_wait(service, loop, waiting=2)
    apprentice = loop.model()["apprentice"]
    assert (apprentice["decisions"], apprentice["events"]) == (2, 2), apprentice
    assert apprentice["baseline_reward"] == pytest.approx((0.75 + 0.0) / 2)


@pytest.mark.parametrize(("body", "message"), [
    ({"contextFeatures": CONTEXT, "actions": ACTIONS,
      "excludedActions": [a["id"] for a in ACTIONS]}, "every action is excluded"),
    ({"contextFeatures": CONTEXT, "actions": []}, "actions"),
    ({"contextFeatures": CONTEXT,
      "actions": [{"id": f"a{i}", "features": []} for i in range(51)]}, "actions"),
    ({"contextFeatures": CONTEXT, "actions": [ACTIONS[0], ACTIONS[0]]}, "appears twice"),
    ({"contextFeatures": [{"user": {"age": [[[[[[[[[1]]]]]]]]]}}], "actions": ACTIONS},
     "nest deeper"),
    ({"contextFeatures": CONTEXT, "actions": ACTIONS, "slots": 2}, "slots"),
    ({"contextFeatures": CONTEXT, "actions": ACTIONS, "eventId": "a/b"}, "eventId"),
])
def test_bad_ranks_raise_the_sdks_error_with_the_message(loop: Loop, body: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(HttpResponseError, match=message) as raised:
        _client(loop).rank(body)
    assert raised.value.status_code == 400


def test_bad_rewards_and_unknown_events_raise_the_sdks_error(loop: Loop) -> None:
    client = _client(loop)
    answer = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
    with pytest.raises(HttpResponseError, match="value") as raised:
        client.reward(answer["eventId"], {"value": 2.0})
    assert raised.value.status_code == 400
    with pytest.raises(HttpResponseError, match="no event 'nope'") as raised:
        client.reward("nope", {"value": 1.0})
    assert raised.value.status_code == 404
    with pytest.raises(HttpResponseError, match="unknown or revoked API key"):
        Client(loop.endpoint, AzureKeyCredential("nl.x.y")).rank(
            {"contextFeatures": CONTEXT, "actions": ACTIONS})


def test_an_apprentice_loop_serves_the_first_action_not_excluded(loop: Loop) -> None:
    assert loop.api.put("/v1/models/loop/mode", json={"mode": "apprentice"}).status_code == 200
    answer = _client(loop).rank({"contextFeatures": CONTEXT, "actions": ACTIONS,
                                 "excludedActions": ["news"]})
    assert answer["rewardActionId"] == "sports"
    assert [r["probability"] for r in answer["ranking"]] == [1.0, 0.0, 0.0, 0.0]
    assert answer["ranking"][-1]["id"] == "news"


def _admin(loop: Loop) -> PersonalizerAdministrationClient:
    return PersonalizerAdministrationClient(loop.endpoint, AzureKeyCredential(loop.key))


def test_the_service_configuration_is_the_models_settings(loop: Loop) -> None:
    admin = _admin(loop)
    shown = admin.get_service_configuration()
    assert {k: shown[k] for k in ("rewardWaitTime", "defaultReward", "rewardAggregation",
                                  "explorationPercentage", "learningMode")} == {
        "rewardWaitTime": "PT10M", "defaultReward": 0.0, "rewardAggregation": "earliest",
        "explorationPercentage": 0.2, "learningMode": "Online"}
    assert admin.update_service_configuration(shown) == shown  # written back unchanged
    changed = admin.update_service_configuration(
        {**shown, "rewardWaitTime": "PT5M", "explorationPercentage": 0.1,
         "learningMode": "Apprentice"})
    assert (changed["rewardWaitTime"], changed["explorationPercentage"],
            changed["learningMode"]) == ("PT5M", 0.1, "Apprentice")
    model = loop.model()
    assert (model["feedback"]["wait_seconds"], model["params"]["epsilon"],
            model["mode"]) == (300, 0.1, "apprentice")
    assert admin.get_service_configuration() == changed


def test_a_logging_only_loop_serves_the_baseline_and_learns_nothing(loop: Loop) -> None:
    admin, client = _admin(loop), _client(loop)
    shown = admin.update_service_configuration({"learningMode": "LoggingOnly"})
    assert (shown["learningMode"], loop.model()["mode"]) == ("LoggingOnly", "logging")
    initial = orjson.loads(b"".join(admin.export_model()))["state"]
    for _ in range(5):
        answer = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS,
                              "excludedActions": ["news"]})
        assert answer["rewardActionId"] == "sports"
        assert [r["probability"] for r in answer["ranking"]] == [1.0, 0.0, 0.0, 0.0]
        client.reward(answer["eventId"], {"value": 1.0})
    loop.sync()
    model = loop.model()
    assert (model["stats"]["feedback_accepted"], model["stats"]["events_applied"],
            model["apprentice"]["events"]) == (5, 5, 5), model
    assert orjson.loads(b"".join(admin.export_model()))["state"] == initial

    assert admin.update_service_configuration({"learningMode": "Online"})[
        "learningMode"] == "Online"
    answer = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
    client.reward(answer["eventId"], {"value": 1.0})
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 6
    assert orjson.loads(b"".join(admin.export_model()))["state"] != initial


@pytest.mark.parametrize(("change", "message"), [
    ({"rewardAggregation": "latest"}, "rewardAggregation 'latest' is not supported"),
    ({"learningMode": "Offline"}, "learningMode 'Offline' is not supported"),
    ({"defaultReward": 0.5}, "defaultReward 0.5 is not supported"),
    ({"rewardWaitTime": "10 minutes"}, "ISO 8601"),
    ({"rewardWaitTime": "P31D"}, "PT1S to P30D"),
    ({"explorationPercentage": 0.99}, "anchor_share"),
    ({"isAutoOptimizationEnabled": True, "autoOptimizationFrequency": "PT30S"},
     "PT1M to P90D"),
    ({"isAutoOptimizationEnabled": "yes"}, "isAutoOptimizationEnabled must be true or false"),
    ({"rewardWaitTme": "PT1M"}, "no service configuration field 'rewardWaitTme'"),
])
def test_configuration_changes_not_supported_are_refused_naming_them(
        loop: Loop, change: dict[str, Any], message: str) -> None:
    with pytest.raises(HttpResponseError, match=message) as raised:
        _admin(loop).update_service_configuration(change)
    assert raised.value.status_code == 400
    assert loop.model()["feedback"]["wait_seconds"] == 600  # nothing changed


def test_the_policy_is_the_models_learner_configuration(loop: Loop) -> None:
    admin = _admin(loop)
    shown = admin.get_policy()
    assert shown["name"] == "noisyloop"
    assert orjson.loads(shown["arguments"]) == {"algorithm": "ridge_pl",
                                                "params": loop.model()["params"]}
    assert loop.model()["params"]["epsilon"] == 0.2  # the preset's exploration


def test_a_vowpal_wabbit_policy_is_translated_and_keeps_what_was_learned(loop: Loop) -> None:
    client, admin = _client(loop), _admin(loop)
    for value in (1.0, 0.0, 1.0):
        client.reward(client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})["eventId"],
                      {"value": value})
    loop.sync()
    learned = orjson.loads(b"".join(admin.export_model()))["state"]
    answer = admin.update_policy({"name": "mine",
                                  "arguments": "--cb_explore_adf --epsilon 0.4 --quiet"})
    assert answer["translation"] == {"algorithm": "ridge_pl",
                                     "params": {"temperature": 0.0, "epsilon": 0.4},
                                     "io_only": ["--quiet"]}
    params = loop.model()["params"]
    assert (params["temperature"], params["epsilon"]) == (0.0, 0.4)
    assert orjson.loads(answer["arguments"])["params"] == params
    assert orjson.loads(b"".join(admin.export_model()))["state"] == learned
    # epsilon-greedy over 4 actions: the best gets 1 - 0.4 - anchor_share + 0.4 / 4, the
    # lowest-scored one its anchor share too (ridge_pl's service default 0.03)
    ranking = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})["ranking"]
    top = max(action["probability"] for action in ranking)
    assert top == pytest.approx(1 - 0.4 - params["anchor_share"] + 0.4 / 4, abs=1e-6)
    softmax = admin.update_policy({"name": "s",
                                   "arguments": "--cb_explore_adf --softmax --lambda 4"})
    assert softmax["translation"]["params"] == {"temperature": 0.25, "epsilon": 0.0}


def test_a_json_policy_sets_the_learners_params_and_reset_restores_the_defaults(
        loop: Loop) -> None:
    admin = _admin(loop)
    before = loop.model()["params"]
    admin.update_policy({"name": "n", "arguments": orjson.dumps(
        {"algorithm": "ridge_pl", "params": {"ridge": 2.5, "epsilon": 0.1}}).decode()})
    assert {k: loop.model()["params"][k] for k in ("ridge", "epsilon")} == {"ridge": 2.5,
                                                                          "epsilon": 0.1}
    reset = admin.reset_policy()
    assert loop.model()["params"] == before
    assert orjson.loads(reset["arguments"])["params"] == before


@pytest.mark.parametrize(("arguments", "message"), [
    ("--cb_explore_adf --epsilon 0.2 --power_t 0", "'--power_t' has no noisyloop equivalent"),
    ("--cb_explore_adf --squarecb", "'--squarecb' has no noisyloop equivalent"),
    ("--cb_explore --epsilon 0.1", "'--cb_explore' has no noisyloop equivalent"),
    ("--epsilon 0.1", "--cb_explore_adf"),
    ("--cb_explore_adf --epsilon", "--epsilon needs a number"),
    ('{"algorithm": "linucb"}', "no algorithm of task 'rank'"),
    ('{"params": {"slots": 2}}', "slots is the model's shape"),
    ('{"params": {"ridge": "high"}}', "arguments.params.ridge"),
    ('{"params": {"epsilon": 2}}', "epsilon"),
    ('{"params": ', "not valid JSON"),
])
def test_policies_without_an_equivalent_are_refused_naming_the_argument(
        loop: Loop, arguments: str, message: str) -> None:
    before = loop.model()["params"]
    with pytest.raises(HttpResponseError, match=message) as raised:
        _admin(loop).update_policy({"name": "x", "arguments": arguments})
    assert raised.value.status_code == 400
    assert loop.model()["params"] == before


def test_a_model_exported_reset_and_imported_is_the_model_exported(loop: Loop) -> None:
    client, admin = _client(loop), _admin(loop)
    for value in (1.0, 0.0, 1.0):
        client.reward(client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})["eventId"],
                      {"value": value})
    loop.sync()
    exported = b"".join(admin.export_model())
    learned = orjson.loads(exported)["state"]
    admin.reset_model()
    assert orjson.loads(b"".join(admin.export_model()))["state"] != learned
    admin.import_model(io.BytesIO(exported))
    assert orjson.loads(b"".join(admin.export_model()))["state"] == learned
    properties = admin.get_model_properties()
    model = loop.model()
    assert (properties["creationTime"], properties["lastModifiedTime"]) == (
        model["created_at"], model["updated_at"])
    with pytest.raises(HttpResponseError, match="state") as raised:
        admin.import_model(io.BytesIO(b'{"state": {}}'))
    assert raised.value.status_code == 400
    with pytest.raises(HttpResponseError) as raised:  # signed exports: refused, named
        b"".join(admin.export_model(signed=True))
    assert raised.value.status_code == 400
    r = httpx.get(f"{loop.endpoint}/personalizer/model", params={"signed": "true"},
                  headers={"Ocp-Apim-Subscription-Key": loop.key})
    assert (r.status_code, r.json()["error"]["target"]) == (400, "signed"), r.text


def test_log_properties_give_the_decision_logs_time_range_and_delete_clears_it(
        loop: Loop) -> None:
    admin, client = _admin(loop), _client(loop)
    assert "dateRange" not in admin.get_log_properties()
    before = datetime.now(UTC)
    for _ in range(2):
        client.reward(client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})["eventId"],
                      {"value": 1.0})
        loop.sync()
    found = admin.get_log_properties()["dateRange"]
    first, last = (datetime.fromisoformat(found[k]) for k in ("from", "to"))
    assert before - timedelta(seconds=1) <= first <= last <= datetime.now(UTC)
    admin.delete_logs()
    assert "dateRange" not in admin.get_log_properties()
    assert loop.api.get("/v1/models/loop/log").text == ""
    assert loop.model()["stats"]["events_applied"] == 2  # what was learned stays
    client.reward(client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})["eventId"],
                  {"value": 1.0})
    loop.sync()
    assert len(loop.api.get("/v1/models/loop/log").text.splitlines()) == 1


#: ``CONTEXT`` and ``ACTIONS`` flattened by hand (strings categorical, booleans 1 or 0).
FLAT_CONTEXT = {"user.profile": "gold", "user.age": 31.0, "user.returning": 1.0,
                "environment.daypart": "morning", "environment.weekend": 0.0}
FLAT_ACTIONS = {a["id"]: {"item.kind": a["features"][0]["item"]["kind"],
                          "item.price": float(a["features"][0]["item"]["price"])}
                for a in ACTIONS}


def _exported_weights(loop: Loop, admin: PersonalizerAdministrationClient,
                      ) -> tuple[int, int, tuple[float, np.ndarray, np.ndarray]]:
    """The loop's context and action sizes and its score's weights ``(w0, w_a, W)`` (the
    score is ``w0 + a @ w_a + x @ W @ a``), from the SDK's model export."""
    from app.learners.build import build_learner

    snapshot = orjson.loads(b"".join(admin.export_model()))
    model = loop.model()
    config = ModelConfig.of({**snapshot["model"], "seed": model["seed"]})
    state = {name: np.load(io.BytesIO(base64.b64decode(a["data_b64"])))
             for name, a in snapshot["state"].items()}
    w = build_learner(config, state, noise=(model["noise"]["rho0"], model["noise"]["rho1"])
                      ).weights()
    dx, da = config.n_features, int(config.params["n_action_features"])
    return dx, da, (float(w[0]), w[1:1 + da], w[1 + da:].reshape(dx, da))


def test_inference_explanations_are_the_weights_times_the_features(loop: Loop) -> None:
    """Each feature's score is its hashed value times the model's weights, computed here from
    the exported weights with scikit-learn's FeatureHasher (to 1e-9)."""
    from sklearn.feature_extraction import FeatureHasher


    client, admin = _client(loop), _admin(loop)
    rng = np.random.default_rng(3)
    for _ in range(40):
        answer = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
        client.reward(answer["eventId"], {"value": float(rng.random() < 0.5)})
    loop.sync()
    assert "inferenceExplanation" not in client.rank({"contextFeatures": CONTEXT,
                                                      "actions": ACTIONS})
    admin.update_service_configuration({"isInferenceExplainabilityEnabled": True})
    explained = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS,
                             "excludedActions": ["music"]})["inferenceExplanation"]

    dx, da, (w0, wa, W) = _exported_weights(loop, admin)

    def hashed(features: dict[str, Any], n: int) -> np.ndarray:
        out: np.ndarray = FeatureHasher(n_features=n, input_type="dict").transform(
            [features]).toarray()[0]
        return out

    assert [e["id"] for e in explained] == ["news", "sports", "weather"]
    checked = 0
    for e in explained:
        a = hashed(FLAT_ACTIONS[e["id"]], da)
        expected = {"(intercept)": w0,
                    **{name: hashed({name: v}, dx) @ (W @ a) for name, v in FLAT_CONTEXT.items()},
                    **{name: hashed({name: v}, da) @ wa
                       for name, v in FLAT_ACTIONS[e["id"]].items()}}
        got = {f["name"]: f["score"] for f in e["features"]}
        assert got == pytest.approx(expected, abs=1e-9)
        assert sum(got.values()) == pytest.approx(w0 + a @ wa + hashed(FLAT_CONTEXT, dx) @ W @ a,
                                                  abs=1e-9)
        checked += 1
    assert checked == 3 and np.abs(W).max() > 0  # the model had learned something


#: Two-sided 99.9% over 95%: a 95% interval widened to the level of a one-seed check that
#: fails by chance once in a thousand seeds.
WIDEN_95_TO_999 = 3.2905 / 1.96
#: Decisions an evaluation test logs.
EVALUATED_EVENTS = 600


def test_an_evaluation_values_the_online_and_a_random_policy_on_the_log(
        service: Service, loop: Loop) -> None:
    """The online policy's and a random one's values over the log's time range, each the
    SNIPS estimate of noisyloop's own evaluation with its 95% interval; checked against the
    true expected rewards at the 99.9% level (one seed)."""
    from tests.api.test_evaluations import run_jobs

    client, admin = _client(loop), _admin(loop)
    rng = np.random.default_rng(11)
    start = datetime.now(UTC) - timedelta(seconds=1)
    played: list[float] = []
    for t in range(EVALUATED_EVENTS):
        segment = list(SEGMENTS)[t % len(SEGMENTS)]
        answer = client.rank({"contextFeatures": [{"user": {"segment": segment}}],
                              "actions": ACTIONS})
        p = P_LIKED if answer["rewardActionId"] == SEGMENTS[segment] else P_OTHER
        played.append(p)
        client.reward(answer["eventId"], {"value": float(rng.random() < p)})
    loop.sync()
    end = datetime.now(UTC) + timedelta(seconds=1)
    window = {"start_time": start, "end_time": end}
    admin.create_evaluation("ev-1", {"name": "first", "startTime": start.isoformat(),
                                     "endTime": end.isoformat()})
    assert admin.get_evaluation("ev-1", **window)["status"] == "Running"
    assert run_jobs(service.redis_url) >= 2
    done = admin.get_evaluation("ev-1", **window)
    assert done["status"] == "Succeeded", done
    truths = {"Online": float(np.mean(played)),
              "Random": (P_LIKED + (len(ACTIONS) - 1) * P_OTHER) / len(ACTIONS)}
    checked = 0
    for entry in done["content"]["value"]:
        summary, native = entry["summary"], entry["noisyloop"]
        assert native["n"] == EVALUATED_EVENTS
        snips = native["snips"]
        assert summary["confidenceInterval"] == [snips["ci_low"], snips["ci_high"]]
        assert summary.get("calibrationUnreliable", False) == native.get(
            "calibration_unreliable", False)
        assert summary.get("insufficientData", False) == native.get("insufficient_data", False)
        low, high = summary["confidenceInterval"]
        value = summary["expectedReward"]
        if value is None:  # flagged: the interval widened to hold whatever the weights
            assert native["insufficient_data"] and summary["reason"]
            value = snips["value"]
        else:
            assert value == snips["value"]
        truth = truths[entry["policySource"]]
        assert value - WIDEN_95_TO_999 * (value - low) <= truth, (entry, truth)
        assert truth <= value + WIDEN_95_TO_999 * (high - value), (entry, truth)
        checked += 1
    assert [e["policySource"] for e in done["content"]["value"]] == ["Online", "Random"]
    assert checked == 2
    assert [e["id"] for e in admin.list_evaluations()] == ["ev-1"]

    with pytest.raises(HttpResponseError) as raised:
        admin.create_evaluation("ev-1", {"name": "again", "startTime": start.isoformat(),
                                         "endTime": end.isoformat()})
    assert raised.value.status_code == 409
    admin.delete_evaluation("ev-1")
    with pytest.raises(HttpResponseError) as raised:
        admin.get_evaluation("ev-1", **window)
    assert raised.value.status_code == 404


def test_v1_evaluation_policy_results_are_sums_recomputed_from_the_log(
        service: Service, loop: Loop) -> None:
    """Personalizer v1.0's ``policyResults`` (plain HTTP on the v1.0 routes): each policy's
    IPS numerator (of the noise-corrected rewards h(f)) and denominators, sum of squares and
    non-zero count equal a recomputation from the exported decision log (to 1e-9: 120 terms
    below 40 summed in another order differ by about 1e-12), and ``numerator / n`` and
    ``numerator / snipsDenominator`` are the IPS and SNIPS values (to 1e-12: one division)."""
    from tests.api.test_evaluations import run_jobs

    client, admin = _client(loop), _admin(loop)
    rng = np.random.default_rng(3)
    start = datetime.now(UTC) - timedelta(seconds=1)
    for t in range(120):
        segment = list(SEGMENTS)[t % len(SEGMENTS)]
        answer = client.rank({"contextFeatures": [{"user": {"segment": segment}}],
                              "actions": ACTIONS, "excludedActions": ["music"] * (t % 2)})
        client.reward(answer["eventId"], {"value": float(rng.random() < 0.5)})
    loop.sync()
    rho0, rho1 = 0.05, 0.1  # the loop's click-noise rates: the evaluation corrects by them
    r = loop.api.put("/v1/models/loop/noise", json={"rho0": rho0, "rho1": rho1})
    assert r.status_code == 200, r.text
    end = datetime.now(UTC) + timedelta(seconds=1)
    v1, key = f"{loop.endpoint}/personalizer/v1.0", {"Ocp-Apim-Subscription-Key": loop.key}
    r = httpx.post(f"{v1}/evaluations", headers=key, json={
        "name": "v1", "startTime": start.isoformat(), "endTime": end.isoformat(),
        "enableOfflineExperimentation": False, "policies": []})
    assert r.status_code == 201 and r.json()["status"] == "pending", r.text  # v1.0's
    evaluation_id = r.json()["id"]
    assert r.headers["Location"].endswith(f"/personalizer/v1.0/evaluations/{evaluation_id}")
    assert run_jobs(service.redis_url) >= 2
    r = httpx.get(f"{v1}/evaluations/{evaluation_id}", headers=key)
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "completed", done  # v1.0's spelling of Succeeded
    newer = admin.get_evaluation(evaluation_id, start_time=start, end_time=end)
    assert newer["status"] == "Succeeded"
    assert newer["policyResults"] == done["policyResults"]  # the newer SDK reads the same

    lines = [orjson.loads(line) for line in loop.api.get("/v1/models/loop/log").text.split()]
    events = [line for line in lines if line["type"] == "event"]
    clicks = (np.array([e["slots"][0]["click"] for e in events], dtype=float)
              - rho0) / (1 - rho0 - rho1)  # h(f)
    p = np.array([e["slots"][0]["propensity"] for e in events], dtype=float)
    offered = np.array([e["n_candidates"] for e in events], dtype=float)
    assert [e["slots"][0]["slot"] for e in events] == [0] * len(events)
    weights = {"Online": np.ones(len(events)), "Random": 1.0 / offered / p}
    checked = 0
    for result, entry in zip(done["policyResults"], done["content"]["value"], strict=True):
        native, w = entry["noisyloop"], weights[result["policySource"]]
        assert (native["correction"]["rho0"], native["correction"]["rho1"]) == (rho0, rho1)
        total = result["totalSummary"]
        assert result["summary"] == [{**total, "timeStamp": done["startTime"]}]
        assert total["timeStamp"] == done["endTime"]
        wr = w * clicks
        assert total["ipsEstimatorDenominator"] == len(events) == native["n"]
        assert total["ipsEstimatorNumerator"] == pytest.approx(wr.sum(), abs=1e-9)
        assert total["snipsEstimatorDenominator"] == pytest.approx(w.sum(), abs=1e-9)
        assert total["sumOfSquares"] == pytest.approx(wr @ wr, abs=1e-9)
        assert total["nonZeroProbability"] == int((w > 0).sum())
        numerator = total["ipsEstimatorNumerator"]
        assert numerator / total["ipsEstimatorDenominator"] == pytest.approx(
            native["ips"]["value"], abs=1e-12)
        assert total["averageReward"] == pytest.approx(native["ips"]["value"], abs=1e-12)
        assert numerator / total["snipsEstimatorDenominator"] == pytest.approx(
            native["snips"]["value"], abs=1e-12)
        assert result.get("insufficientData", False) == native.get("insufficient_data", False)
        checked += 1
    assert checked == 2 and len(events) == 120
    assert not np.allclose(weights["Random"], 1.0)  # the random policy's weights vary
    listed = httpx.get(f"{v1}/evaluations", headers=key).json()
    assert [(e["status"], e["policyResults"]) for e in listed] == [
        ("completed", done["policyResults"])]
    assert httpx.delete(f"{v1}/evaluations/{evaluation_id}", headers=key).status_code == 204
    assert httpx.get(f"{v1}/evaluations", headers=key).json() == []


def test_a_bad_v1_evaluation_is_refused_in_personalizers_shape(loop: Loop) -> None:
    v1, key = f"{loop.endpoint}/personalizer/v1.0", {"Ocp-Apim-Subscription-Key": loop.key}
    now = datetime.now(UTC)
    for body, field in (({"name": "x", "startTime": now.isoformat(),
                          "endTime": (now - timedelta(hours=1)).isoformat()}, "endTime"),
                        ({"name": "x", "startTime": now.isoformat(),
                          "endTime": now.isoformat(), "bogus": 1}, "bogus"),
                        ({"name": "x", "startTime": now.isoformat(), "endTime": now.isoformat(),
                          "enableOfflineExperimentation": "maybe"},
                         "enableOfflineExperimentation")):
        r = httpx.post(f"{v1}/evaluations", headers=key, json=body)
        assert 400 <= r.status_code < 500 and field in r.json()["error"]["message"], r.text
        if field == "enableOfflineExperimentation":  # named as it was sent
            assert "enablePolicyOptimization" not in r.text, r.text
    assert httpx.get(f"{v1}/evaluations", headers=key).json() == []


#: The simulated world: a user of each segment likes one kind of item; the reward is
#: Bernoulli(0.8) for the liked action and Bernoulli(0.2) for the others.
SEGMENTS = {"student": "music", "parent": "news", "fan": "sports"}
P_LIKED, P_OTHER = 0.8, 0.2
#: Events the loop learns from before its greedy choices are scored, and those scored.
LEARN_EVENTS, SCORED_EVENTS = 500, 200
#: Share of the random-to-best gap the greedy choice must close (derivation in the test).
GAP_CLOSED = 0.9


@pytest.mark.slow
def test_a_simulated_world_learns_through_rank_and_reward(loop: Loop) -> None:
    """The greedy choice (the action most likely to be chosen) closes at least 0.9 of the
    gap between a random choice and the best within 500 events of rank and reward, with
    noisy (Bernoulli) rewards and a feature of pure noise in every context, through
    Personalizer's SDK as through the native rank API on a model of the same settings.

    The world has 3 segments and 4 actions: random scores (0.8 + 3 * 0.2) / 4 = 0.35,
    the best 0.8.  The scored value is the mean *true* reward of the greedy choice over
    200 contexts, the segments in turn (67, 67 and 66), so it has no noise of its own: a
    policy that learned every segment scores a gap share of exactly 1; one right for two
    segments of three at most (0.8 * 134 + 0.2 * 66) / 200 = 0.602, a share of 0.56 (and
    the issue's acceptance floor is 0.6); random scores 0 on average.  0.9 asks for the
    best choice on at least 92.5% of the scored contexts (0.2 + 0.6 f >= 0.35 + 0.9 * 0.45).
    """
    sdk, native = world_players(loop)
    closed = gap_closed(*sdk)
    print(f"gap closed by the greedy choice: {closed:.3f} (Personalizer's SDK)")
    native_closed = gap_closed(*native)
    print(f"gap closed by the greedy choice: {native_closed:.3f} (the native rank API)")
    assert min(closed, native_closed) >= GAP_CLOSED


#: How a world is played: ``decide(context, scored)`` gives the event id, the chosen action
#: and (when scored) the greedy one; ``reward(event, value)`` rewards the chosen action.
Player = tuple[Callable[[list[dict[str, Any]], bool], tuple[str, str, str]],
               Callable[[str, float], None]]


def world_players(loop: Loop) -> tuple[Player, Player]:
    """The simulated world's two players: the loop through Personalizer's SDK, and a model
    ``native`` of the same settings (created here) through the native rank API."""
    client = _client(loop)

    def personalizer(context: list[dict[str, Any]], scored: bool) -> tuple[str, str, str]:
        answer = client.rank({"contextFeatures": context, "actions": ACTIONS})
        greedy = max(answer["ranking"], key=lambda r: r["probability"])["id"]
        return answer["eventId"], answer["rewardActionId"], greedy

    r = loop.api.post("/v1/models", json={
        "model_id": "native", "task": "rank", "n_features": 32, "n_action_features": 16,
        "slots": 1, "seed": 0, "params": {"epsilon": 0.2},
        "feedback": {"wait_seconds": 600, "on_timeout": "no_click"}})
    assert r.status_code == 201, r.text
    actions = [{"id": i, "features": {"named": named}} for i, named in FLAT_ACTIONS.items()]
    chosen: dict[str, str] = {}  # the native feedback names the chosen action

    def native(context: list[dict[str, Any]], scored: bool) -> tuple[str, str, str]:
        named = {"user.segment": context[0]["user"]["segment"],
                 "user.noise": context[0]["user"]["noise"]}
        body = {"features": {"named": named}, "actions": actions}
        answer = loop.api.post("/v1/models/native/rank", json=body).json()
        greedy = (loop.api.post("/v1/models/native/rank", json={**body, "explore": False})
                  .json()["ranking"][0]["id"] if scored else "")
        chosen[answer["event_id"]] = answer["ranking"][0]["id"]
        return answer["event_id"], answer["ranking"][0]["id"], greedy

    def native_reward(event: str, value: float) -> None:
        r = loop.api.post("/v1/models/native/feedback",
                          json={"event_id": event, "rewards": {chosen.pop(event): value}})
        assert r.status_code == 202, r.text

    return ((personalizer, lambda event, value: client.reward(event, {"value": value})),
            (native, native_reward))


def gap_closed(decide: Callable[[list[dict[str, Any]], bool], tuple[str, str, str]],
               reward: Callable[[str, float], None],
               learn_events: int = LEARN_EVENTS) -> float:
    """The world of :func:`test_a_simulated_world_learns_through_rank_and_reward` played
    through ``decide`` and ``reward`` (:data:`Player`): ``learn_events`` events, then
    :data:`SCORED_EVENTS` more whose segments come in turn; the gap share the greedy choice
    closes on those."""
    rng = np.random.default_rng(7)
    segments = list(SEGMENTS)
    greedy_value: list[float] = []
    for t in range(learn_events + SCORED_EVENTS):
        scored = t >= learn_events
        segment = (segments[(t - learn_events) % len(segments)] if scored else
                   segments[int(rng.integers(len(segments)))])
        context = [{"user": {"segment": segment, "noise": float(rng.standard_normal())}}]
        event, action, greedy = decide(context, scored)
        liked = SEGMENTS[segment]
        if scored:
            greedy_value.append(P_LIKED if greedy == liked else P_OTHER)
        p = P_LIKED if action == liked else P_OTHER
        reward(event, float(rng.random() < p))
    assert len(greedy_value) == SCORED_EVENTS
    random_value = (P_LIKED + 3 * P_OTHER) / 4
    return (float(np.mean(greedy_value)) - random_value) / (P_LIKED - random_value)


def test_feature_importances_are_the_mean_absolute_terms_of_the_chosen_actions(
        loop: Loop) -> None:
    """A report's score of each feature is the mean over the logged decisions in its range
    of |the feature's term in the score of the action placed first|, computed here from the
    exported weights, the decision log and scikit-learn's FeatureHasher (to 1e-9)."""
    from sklearn.feature_extraction import FeatureHasher

    from app.evaluation.servicelog import dense_vector

    client, admin = _client(loop), _admin(loop)
    rng = np.random.default_rng(5)
    start = datetime.now(UTC) - timedelta(seconds=1)
    contexts = [[{"user": {"profile": segment, "age": age}}]
                for segment in SEGMENTS for age in (20, 45)]
    for t in range(60):
        answer = client.rank({"contextFeatures": contexts[t % len(contexts)],
                              "actions": ACTIONS})
        client.reward(answer["eventId"], {"value": float(rng.random() < 0.5)})
    loop.sync()
    end = datetime.now(UTC) + timedelta(seconds=1)
    admin.create_feature_importance("fi-1", {"name": "first", "startTime": start.isoformat(),
                                             "endTime": end.isoformat()})
    report = admin.get_feature_importance("fi-1")

    dx, da, (_, wa, W) = _exported_weights(loop, admin)
    lines = [orjson.loads(line) for line in loop.api.get("/v1/models/loop/log").text.split()]
    rows = [(dense_vector(line["features"]), dense_vector(line["slots"][0]["features"]))
            for line in lines]
    expected_context = np.mean([np.abs(x * (W @ a)) for x, a in rows], axis=0)
    expected_action = np.mean([np.abs(a * wa) for _, a in rows], axis=0)

    def bucket(key: str, n: int) -> int:
        return int(FeatureHasher(n_features=n, input_type="dict").transform(
            [{key: 1.0}]).indices[0])

    names = {("context", bucket(key, dx)) for key in
             ["user.age", *(f"user.profile={s}" for s in SEGMENTS)]}
    names |= {("action", bucket(key, da)) for key in
              ["item.price", *(f"item.kind={k}" for k in ("text", "video", "audio"))]}
    scores = report["featureScores"]
    assert report["status"] == "Succeeded" and report["decisions"] == len(rows) == 60
    assert {(s["kind"], s["bucket"]) for s in scores} <= names
    for s in scores:
        expected = (expected_context if s["kind"] == "context" else expected_action)[s["bucket"]]
        assert s["score"] == pytest.approx(expected, abs=1e-9), s
        assert s["featureName"] != f"#{s['bucket']}"  # named by the keys the ranks sent
    assert any(s["featureName"] == "user.age" and s["namespace"] == "user" for s in scores)
    assert [s["score"] for s in scores] == sorted((s["score"] for s in scores), reverse=True)
    assert np.abs(W).max() > 0 and len(scores) >= 4  # the model had learned something

    assert [r["id"] for r in admin.list_feature_importances()] == ["fi-1"]
    with pytest.raises(HttpResponseError, match="fi-1") as raised:
        admin.create_feature_importance("fi-1", {"name": "again",
                                                 "startTime": start.isoformat(),
                                                 "endTime": end.isoformat()})
    assert raised.value.status_code == 409
    with pytest.raises(HttpResponseError, match="endTime"):
        admin.create_feature_importance("fi-2", {"name": "backwards",
                                                 "startTime": end.isoformat(),
                                                 "endTime": start.isoformat()})
    admin.create_feature_importance("fi-3", {"name": "empty", "startTime": "2020-01-01T00:00:00",
                                             "endTime": "2020-01-02T00:00:00"})
    assert admin.get_feature_importance("fi-3")["featureScores"] == []
    admin.delete_feature_importance("fi-1")
    with pytest.raises(HttpResponseError) as raised:
        admin.get_feature_importance("fi-1")
    assert raised.value.status_code == 404
    assert [r["id"] for r in admin.list_feature_importances()] == ["fi-3"]
