"""Personalizer's multi-slot calls through ``azure-ai-personalizer`` against the real service:
rank, reward and activate per slot, exactly once, the default reward, apprentice and
logging-only loops serving each slot's baseline, every error in Personalizer's shape, and a
simulated world with slot-dependent best actions, position bias and noisy rewards that the
loop learns."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
from azure.core.exceptions import HttpResponseError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import TestClient, new_tenant
from tests.api.test_personalizer import (
    ACTIONS,
    CONTEXT,
    Client,
    Loop,
    Service,
    _admin,
    _client,
    _loop,
    pass_reward_wait,
    service,
)
from tests.api.test_personalizer_fuzz import FEATURES, JSON, _check

__all__ = ["service"]  # the module's service fixture, shared

SLOTS = [{"id": "top", "features": [{"size": "large", "position": 0}],
          "baselineAction": "news"},
         {"id": "side", "features": [{"size": "small"}], "excludedActions": ["news"],
          "baselineAction": "sports"},
         {"id": "footer", "features": [{"size": "small", "bottom": True}],
          "baselineAction": "music"}]


@pytest.fixture
def loop(service: Service) -> Iterator[Loop]:
    """A Personalizer loop that fills up to three slots."""
    yield from _loop(service, slots=3)


def _rank(client: Client, **body: Any) -> dict[str, Any]:
    out: dict[str, Any] = client.rank_multi_slot(
        {"contextFeatures": CONTEXT, "actions": ACTIONS, "slots": SLOTS, **body})
    return out


def _log(loop: Loop) -> list[dict[str, Any]]:
    r = loop.api.get("/v1/models/loop/log")
    assert r.status_code == 200, r.text
    return [orjson.loads(line) for line in r.content.splitlines()
            if orjson.loads(line)["type"] == "event"]


def test_each_slot_gets_its_own_action_among_those_it_allows(loop: Loop) -> None:
    client = _client(loop)
    seen = set()
    for i in range(40):
        answer = _rank(client, eventId=f"ms-{i}")
        assert answer["eventId"] == f"ms-{i}"
        assert [s["id"] for s in answer["slots"]] == ["top", "side", "footer"]
        chosen = [s["rewardActionId"] for s in answer["slots"]]
        assert len(set(chosen)) == 3 and chosen[1] != "news"
        seen.update(enumerate(chosen))
    # 20% exploration spread over the actions left: every allowed action reaches every
    # slot in 40 ranks but "news" the side slot (a miss has probability < 12 (1 - 0.05)^40)
    assert seen == {(k, a["id"]) for k in range(3) for a in ACTIONS} - {(1, "news")}


def test_each_slots_reward_is_its_positions_feedback_learned_once(loop: Loop) -> None:
    client = _client(loop)
    answer = _rank(client)
    assert len(answer["eventId"]) == 24  # noisyloop's own event id when none is given
    chosen = {s["id"]: s["rewardActionId"] for s in answer["slots"]}
    client.reward_multi_slot(answer["eventId"], {"reward": [{"slotId": "side", "value": 0.5},
                                                            {"slotId": "top", "value": 1.0}]})
    client.reward_multi_slot(answer["eventId"],  # earliest: ignored
                             {"reward": [{"slotId": "footer", "value": 1.0}]})
    loop.sync()
    stats = loop.model()["stats"]
    assert (stats["feedback_accepted"], stats["events_applied"]) == (1, 1), stats
    [event] = _log(loop)
    # slot k of the ranking is position k; footer, not rewarded in the first call, gets 0
    assert [s["click"] for s in event["slots"]] == [1.0, 0.5, 0.0]
    assert [s["slot"] for s in event["slots"]] == [0, 1, 2]
    assert chosen["side"] != "news"


def test_with_sum_each_slots_rewards_add_up_and_are_learned_once_at_the_wait(
        service: Service, loop: Loop) -> None:
    """``rewardAggregation: sum``: every reward call of an event adds to its slots (a slot
    not named adds 0), the sums (each clipped to 1) are learned once the reward wait
    passed, an event without reward gets 0 in every slot."""
    client = _client(loop)
    _admin(loop).update_service_configuration({"rewardAggregation": "sum"})
    summed = _rank(client)["eventId"]
    _rank(client)  # no reward
    for rewards in ([("top", 0.5), ("side", 0.25)], [("top", 0.25), ("footer", 1.0)],
                    [("footer", 0.5)]):
        client.reward_multi_slot(summed, {"reward": [{"slotId": slot, "value": value}
                                                     for slot, value in rewards]})
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 0  # open until the wait passed
    pass_reward_wait(service, loop, waiting=2)
    assert loop.model()["stats"]["events_applied"] == 2
    assert sorted([s["click"] for s in event["slots"]] for event in _log(loop)) == [
        [0.0, 0.0, 0.0], [0.75, 0.25, 1.0]]


def test_a_deferred_rank_learns_its_slot_rewards_once_activated(loop: Loop) -> None:
    client = _client(loop)
    answer = _rank(client, eventId="deferred", deferActivation=True)
    client.reward_multi_slot("deferred", {"reward": [{"slotId": "footer", "value": 1.0}]})
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 0  # kept until the activation
    client.activate_multi_slot("deferred")
    client.reward_multi_slot("deferred", {"reward": [{"slotId": "top", "value": 1.0}]})
    loop.sync()
    assert loop.model()["stats"]["events_applied"] == 1
    [event] = _log(loop)
    assert [s["click"] for s in event["slots"]] == [0.0, 0.0, 1.0]
    assert answer["eventId"] == "deferred"
    with pytest.raises(HttpResponseError, match="no event 'nope'") as raised:
        client.activate_multi_slot("nope")
    assert raised.value.status_code == 404


def test_a_rank_without_reward_gets_the_default_reward(service: Service, loop: Loop) -> None:
    client = _client(loop)
    _rank(client)
    deferred = _rank(client, deferActivation=True)
    pass_reward_wait(service, loop)
    stats = loop.model()["stats"]
    assert (stats["events_expired"], stats["events_applied"]) == (1, 1), stats
    assert [s["click"] for s in _log(loop)[0]["slots"]] == [0.0, 0.0, 0.0]
    client.activate_multi_slot(deferred["eventId"])
    pass_reward_wait(service, loop)
    assert loop.model()["stats"]["events_applied"] == 2


@pytest.mark.parametrize("mode", ["Apprentice", "LoggingOnly"])
def test_apprentice_and_logging_only_loops_serve_each_slots_baseline(loop: Loop,
                                                                     mode: str) -> None:
    admin, client = _admin(loop), _client(loop)
    assert admin.update_service_configuration({"learningMode": mode})["learningMode"] == mode
    initial = orjson.loads(b"".join(admin.export_model()))["state"]
    for _ in range(5):
        answer = _rank(client)
        assert [s["rewardActionId"] for s in answer["slots"]] == ["news", "sports", "music"]
        client.reward_multi_slot(answer["eventId"],
                                 {"reward": [{"slotId": "top", "value": 1.0}]})
    loop.sync()
    model = loop.model()
    assert (model["stats"]["events_applied"], model["apprentice"]["events"]) == (5, 5), model
    assert all(s["propensity"] == 1.0 for e in _log(loop) for s in e["slots"])
    learned = orjson.loads(b"".join(admin.export_model()))["state"] != initial
    assert learned == (mode == "Apprentice")


def _slot(k: int, **changes: Any) -> list[dict[str, Any]]:
    return [{**s, **changes} if i == k else s for i, s in enumerate(SLOTS)]


@pytest.mark.parametrize(("body", "message"), [
    ({"slots": _slot(1, id="top")}, r"slots\[1\].id: slot id 'top' appears twice"),
    ({"slots": _slot(0, excludedActions=[a["id"] for a in ACTIONS])},
     r"slots\[0\].excludedActions: slot 'top': every action is excluded"),
    ({"slots": _slot(2, excludedActions=["news", "weather", "music"], baselineAction="sports")},
     r"slots\[2\].excludedActions: slot 'footer' allows 1 action"),
    ({"slots": _slot(0, baselineAction="cinema")},
     r"slots\[0\].baselineAction: baseline action 'cinema' is not among the actions"),
    ({"slots": _slot(1, baselineAction="news")},
     r"slots\[1\].baselineAction: baseline action 'news' is excluded by its slot"),
    ({"slots": _slot(2, baselineAction="news")},
     r"slots\[2\].baselineAction: baseline action 'news' is the baseline of slot 'top' too"),
    ({"slots": [{k: v for k, v in SLOTS[0].items() if k != "baselineAction"}]},
     r"slots\[0\].baselineAction"),
    ({"slots": []}, "slots"),
    ({"slots": [*SLOTS, {"id": "extra", "baselineAction": "weather"}]},
     "4 slots, but the loop fills 3 at most"),
    ({"actions": [ACTIONS[0], ACTIONS[0], *ACTIONS[1:]]}, "appears twice"),
    ({"slots": _slot(0, features=[{"size": [[[[[[[[1]]]]]]]]}])}, "nest deeper"),
    ({"eventId": "a/b"}, "eventId"),
])
def test_bad_multi_slot_ranks_raise_the_sdks_error_with_the_message(
        loop: Loop, body: dict[str, Any], message: str) -> None:
    with pytest.raises(HttpResponseError, match=message) as raised:
        _rank(_client(loop), **body)
    assert raised.value.status_code == 400
    assert raised.value.response.json()["error"]["code"].startswith("Invalid")
    loop.sync()
    assert loop.model()["stats"]["predictions"] == 0  # nothing logged


def test_bad_multi_slot_rewards_and_events_raise_the_sdks_error(loop: Loop) -> None:
    client = _client(loop)
    answer = _rank(client, eventId="e1")
    for reward, message in (
            ([{"slotId": "middle", "value": 1.0}],
             r"reward\[0\].slotId: event 'e1' has no slot 'middle'"),
            ([{"slotId": "top", "value": 1.0}, {"slotId": "top", "value": 0.0}],
             r"reward\[1\].slotId: slot 'top' is rewarded twice"),
            ([{"slotId": "top", "value": 1.5}], "value"),
            ([], "reward")):
        with pytest.raises(HttpResponseError, match=message) as raised:
            client.reward_multi_slot(answer["eventId"], {"reward": reward})
        assert raised.value.status_code == 400
    with pytest.raises(HttpResponseError, match="was ranked multi-slot") as raised:
        client.reward("e1", {"value": 1.0})
    assert raised.value.status_code == 400
    single = client.rank({"contextFeatures": CONTEXT, "actions": ACTIONS})
    with pytest.raises(HttpResponseError, match="was ranked with one slot"):
        client.reward_multi_slot(single["eventId"],
                                 {"reward": [{"slotId": "top", "value": 1.0}]})
    with pytest.raises(HttpResponseError, match="no event 'nope'") as raised:
        client.reward_multi_slot("nope", {"reward": [{"slotId": "top", "value": 1.0}]})
    assert raised.value.status_code == 404
    with pytest.raises(HttpResponseError, match="eventId") as raised:
        _rank(client, eventId="e1")  # the same event id again
    assert raised.value.status_code == 409
    # none of these was learned: the first valid reward still counts
    client.reward_multi_slot("e1", {"reward": [{"slotId": "top", "value": 1.0}]})
    loop.sync()
    assert loop.model()["stats"]["feedback_accepted"] == 1


#: The simulated world: five actions, three slots examined with probabilities THETA (the
#: position bias), three user segments.  For a segment, its three roles' actions have the
#: reward probabilities of ROLE_P in the three slots and the other two actions 0.2
#: everywhere; a slot's reward is Bernoulli(theta_k p) (examined, then liked).
WORLD_ACTIONS = ["news", "sports", "weather", "music", "cinema"]
SLOT_IDS = ["top", "middle", "bottom"]
THETA = (1.0, 0.8, 0.6)
ROLES = {"student": ("music", "sports", "cinema"), "parent": ("news", "weather", "music"),
         "fan": ("sports", "cinema", "news")}
ROLE_P = ((0.8, 0.1, 0.1), (0.3, 0.8, 0.3), (0.5, 0.5, 0.8))
P_OTHER = 0.2
#: Events learned, then contexts whose greedy slate is scored, per seed.
LEARN_EVENTS, SCORED_EVENTS = 400, 100
#: Share of the random-to-best gap each seed's greedy slate must close (derived in the test).
GAP_CLOSED = 0.6


def _p(segment: str, action: str, slot: int) -> float:
    roles = ROLES[segment]
    return ROLE_P[roles.index(action)][slot] if action in roles else P_OTHER


def _value(segment: str, slate: list[str]) -> float:
    """The expected reward of a slate, summed over the slots."""
    return sum(theta * _p(segment, a, k) for k, (theta, a) in enumerate(zip(THETA, slate,
                                                                            strict=True)))


def _random_value(segment: str) -> float:
    """A uniformly random slate's: slot k's action is uniform over the five."""
    return sum(theta * float(np.mean([_p(segment, a, k) for a in WORLD_ACTIONS]))
               for k, theta in enumerate(THETA))


def _world_gap_closed(service: Service, seed: int, slot_features: bool) -> float:
    """The gap share the loop's greedy slate closes after LEARN_EVENTS events of the world
    through rank_multi_slot and reward_multi_slot (exploration then off to read it)."""
    for loop in _loop(service, slots=3, n_action_features=64, seed=seed):
        client, admin = _client(loop), _admin(loop)
        actions = [{"id": a, "features": [{"item": {"name": a}}]} for a in WORLD_ACTIONS]
        slots = [{"id": s, "baselineAction": WORLD_ACTIONS[k],
                  "features": [{"slot": {"position": s}}] if slot_features else []}
                 for k, s in enumerate(SLOT_IDS)]
        rng = np.random.default_rng(seed)
        segments = list(ROLES)
        closed: list[float] = []
        for t in range(LEARN_EVENTS + SCORED_EVENTS):
            if t == LEARN_EVENTS:  # the greedy slate from now on
                admin.update_policy({"name": "greedy", "arguments": orjson.dumps(
                    {"algorithm": "ridge_pl",
                     "params": {"epsilon": 0.0, "anchor_share": 0.0}}).decode()})
            segment = segments[int(rng.integers(len(segments)))]
            context = [{"user": {"segment": segment, "noise": float(rng.standard_normal())}}]
            answer = client.rank_multi_slot({"contextFeatures": context, "actions": actions,
                                             "slots": slots})
            slate = [s["rewardActionId"] for s in answer["slots"]]
            if t >= LEARN_EVENTS:
                best = _value(segment, list(ROLES[segment]))
                closed.append((_value(segment, slate) - _random_value(segment))
                              / (best - _random_value(segment)))
                continue
            rewards = [{"slotId": s, "value": float(rng.random() < theta * _p(segment, a, k))}
                       for k, (s, a, theta) in enumerate(zip(SLOT_IDS, slate, THETA,
                                                             strict=True))]
            client.reward_multi_slot(answer["eventId"], {"reward": rewards})
        assert len(closed) == SCORED_EVENTS
        return float(np.mean(closed))
    raise AssertionError("no loop")


@pytest.mark.slow
@pytest.mark.timeout(900)  # 2,000 ranks and rewards through the SDK: minutes on a busy machine
def test_a_simulated_multi_slot_world_learns_each_slots_best_action(service: Service) -> None:
    """With the slots' features, the greedy slate closes at least 0.6 of the gap between a
    random slate and the best within 400 events at each of three seeds; the same world
    with slots without features does not (the slots' features enter the decision).

    Per segment, the best slate puts the roles' actions in slots 0, 1, 2 (value
    0.8 (1 + 0.8 + 0.6) = 1.92); a random slate is worth 0.88.  The scored value is the
    expected value of each greedy slate (no reward noise), so a loop that learned every
    segment and slot scores exactly 1.  A loop blind to the slots ranks the actions by
    their relevance pooled over the slots (role 2: 0.6, role 1: 0.47, role 0: 0.33), so its
    slate is the roles reversed, worth 0.5 + 0.8 * 0.8 + 0.6 * 0.1 = 1.2: a gap share of
    0.31.  A random slate scores 0 on average.  0.6 is the issue's acceptance floor for the
    single-slot world; here it also separates learning the slots (1 when every segment and
    slot is right; measured 0.82 to 0.96) from learning the actions alone (0.31 derived,
    0.12 and 0.24 measured).  The trainer learns in batches as they come, so runs differ
    (the seeds fix the world and the draws, not the batching).
    """
    with_features = [_world_gap_closed(service, seed, True) for seed in range(3)]
    without = _world_gap_closed(service, 0, False)
    print(f"gap closed by the greedy slate: {np.round(with_features, 3).tolist()} "
          f"(slots with features, seeds 0-2); {without:.3f} (slots without features)")
    assert min(with_features) >= GAP_CLOSED
    assert without < GAP_CLOSED


MULTI_SLOT = "/v1/models/loop/personalizer/multislot"
#: Slot and action ids a fuzzed slot draws from (an unknown one included).
IDS = st.sampled_from(["a", "b", "c", "zz"])


def test_random_multi_slot_bodies_never_answer_500(client: TestClient) -> None:
    """Random JSON to the multi-slot routes, and random slots (features, exclusions,
    baselines, ids) in otherwise valid ranks, get 201/204 or a Personalizer-shaped 4xx."""
    key = new_tenant(client)["Authorization"].split()[1]
    r = client.post("/v1/models", json={"model_id": "loop", "preset": "personalizer",
                                        "slots": 3}, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 201, r.text
    auth = {"Ocp-Apim-Subscription-Key": key}
    rank = client.post(f"{MULTI_SLOT}/rank", headers=auth, json={
        "actions": [{"id": "a"}, {"id": "b"}], "eventId": "e",
        "slots": [{"id": "s", "baselineAction": "a"}, {"id": "t", "baselineAction": "b"}]})
    assert rank.status_code == 201, rank.text
    slot = st.fixed_dictionaries({"id": IDS, "baselineAction": IDS},
                                 optional={"features": FEATURES,
                                           "excludedActions": st.lists(IDS, max_size=3)})
    checked: list[int] = []

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(body=JSON, slots=st.lists(slot, max_size=4), action=FEATURES)
    def run(body: Any, slots: Any, action: Any) -> None:
        for route in ("rank", "events/e/reward", "events/e/activate"):
            _check(client.post(f"{MULTI_SLOT}/{route}", json=body, headers=auth))
        _check(client.post(f"{MULTI_SLOT}/rank", headers=auth, json={
            "actions": [{"id": "a", "features": action}, {"id": "b"}, {"id": "c"}],
            "slots": slots}))
        checked.append(1)

    run()
    assert len(checked) == 150


def test_feature_importances_name_the_features_slots_see(loop: Loop) -> None:
    """A report over multi-slot ranks names every feature of the actions as the first slot
    saw them, the slot's features and their products with the actions' included."""
    client, admin = _client(loop), _admin(loop)
    rng = np.random.default_rng(2)
    start = datetime.now(UTC) - timedelta(seconds=1)
    for _ in range(40):
        answer = _rank(client)
        client.reward_multi_slot(answer["eventId"], {"reward": [
            {"slotId": s["id"], "value": float(rng.random() < 0.5)} for s in answer["slots"]]})
    loop.sync()
    end = datetime.now(UTC) + timedelta(seconds=1)
    admin.create_feature_importance("fi", {"name": "slots", "startTime": start.isoformat(),
                                           "endTime": end.isoformat()})
    scores = admin.get_feature_importance("fi")["featureScores"]
    actions = [s for s in scores if s["kind"] == "action"]
    assert actions and all(s["featureName"] != f"#{s['bucket']}" for s in actions)
    assert any("slot:size=large*" in s["featureName"] for s in actions), actions
