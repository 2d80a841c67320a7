"""GET /v1/models/{id}/log: the applied events as JSON Lines, paged, filtered, tenant-scoped."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
import pytest
import redis

import app.store.events
from app.api import decisionlog
from app.store.keys import ModelKeys
from app.tasks.rank import item_hashes
from tests.api.conftest import TestClient, new_model, new_tenant, post_feedback, predict_all


def sync(client: TestClient, auth: dict[str, str], model: str = "m1") -> None:
    r = client.post(f"/v1/models/{model}/sync", headers=auth)
    assert r.status_code == 200, r.text


def get_log(client: TestClient, auth: dict[str, str], model: str = "m1",
            **params: Any) -> tuple[list[dict[str, Any]], str | None]:
    r = client.get(f"/v1/models/{model}/log", params=params, headers=auth)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-ndjson"
    return [orjson.loads(line) for line in r.content.splitlines()], r.headers.get("x-next-after")


def play_label(client: TestClient, auth: dict[str, str], n: int, seed: int = 0
               ) -> list[dict[str, Any]]:
    X = np.random.default_rng(seed).standard_normal((n, 4))
    preds = predict_all(client, auth, X)
    events = [{"event_id": p["event_id"], "click": p["label"] == 1} for p in preds]
    assert post_feedback(client, auth, {"events": events}).status_code == 202
    return [{**p, "x": x.tolist(), "click": e["click"]}
            for p, x, e in zip(preds, X, events, strict=True)]


@pytest.mark.slow
def test_label_log_holds_every_applied_event_with_context_and_feedback(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    played = play_label(client, tenant, 30)
    sync(client, tenant)
    lines, next_after = get_log(client, tenant)
    assert next_after is None and len(lines) == 30
    by_id = {p["event_id"]: p for p in played}
    for line in lines:
        p = by_id.pop(line["event_id"])
        assert line["type"] == "event" and line["kind"] == "feedback"
        assert line["model_version"] >= 2
        np.testing.assert_allclose(line["features"], p["x"])
        assert line["action"] == p["label"] and line["propensity"] == p["probability"]
        assert line["greedy_action"] == p["greedy_label"]
        assert line["feedback"] == {"click": float(p["click"])}
        assert line["joined_at"] <= line["time"]
    assert not by_id
    # a reset keeps the log and adds a marker
    assert client.post("/v1/models/m1/reset", headers=tenant).status_code == 200
    lines, _ = get_log(client, tenant)
    assert len(lines) == 31 and lines[-1]["type"] == "reset"
    assert lines[-1]["version"] == client.get("/v1/models/m1", headers=tenant).json()["version"]
    # deleting the model deletes its log
    assert client.delete("/v1/models/m1", headers=tenant).status_code == 204
    new_model(client, tenant)
    assert get_log(client, tenant)[0] == []


@pytest.mark.slow
def test_paging_with_after_and_time_filter(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    play_label(client, tenant, 25)
    sync(client, tenant)
    first_time = get_log(client, tenant)[0][-1]["time"]
    time.sleep(0.05)
    boundary = time.time()
    time.sleep(0.05)
    play_label(client, tenant, 12, seed=1)
    sync(client, tenant)
    everything, _ = get_log(client, tenant)
    assert len(everything) == 37
    seen: list[dict[str, Any]] = []
    after = None
    while True:
        params = {"limit": 10, **({"after": after} if after else {})}
        page, after = get_log(client, tenant, **params)
        seen += page
        assert len(page) == 10 or after is None
        if after is None:
            break
    assert seen == everything
    recent, _ = get_log(client, tenant, since=str(boundary))
    assert len(recent) == 12 and recent == everything[25:]
    older, _ = get_log(client, tenant, until=f"{boundary:.3f}")
    assert older == everything[:25]
    assert get_log(client, tenant, until=first_time)[0] == everything[:25]
    # since and after together: the later bound wins
    page, after = get_log(client, tenant, since=str(boundary), limit=6)
    assert page == everything[25:31] and after is not None
    assert get_log(client, tenant, since=str(boundary), after=after)[0] == everything[31:]
    assert get_log(client, tenant, since=str(boundary), after=after.split(":")[0])[0] == \
        everything[37:]  # after a whole entry


@pytest.mark.slow
def test_newest_first_pages_back_in_time(client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    play_label(client, tenant, 25)
    sync(client, tenant)
    time.sleep(0.05)
    boundary = time.time()
    time.sleep(0.05)
    play_label(client, tenant, 12, seed=1)
    sync(client, tenant)
    assert client.post("/v1/models/m1/reset", headers=tenant).status_code == 200
    everything, _ = get_log(client, tenant)
    assert len(everything) == 38 and everything[-1]["type"] == "reset"
    newest, after = get_log(client, tenant, order="desc")
    assert after is None and newest == everything[::-1]
    assert get_log(client, tenant, order="asc")[0] == everything
    # pages of 7 (ending inside entries too) walk back to the oldest line exactly once
    seen: list[dict[str, Any]] = []
    after = None
    while True:
        page, after = get_log(client, tenant, order="desc", limit=7,
                              **({"after": after} if after else {}))
        seen += page
        assert len(page) == 7 or after is None
        if after is None:
            break
    assert seen == everything[::-1]
    # the time bounds: the newest lines of a window
    assert get_log(client, tenant, order="desc", since=str(boundary))[0] == everything[:24:-1]
    older, _ = get_log(client, tenant, order="desc", until=f"{boundary:.3f}")
    assert older == everything[24::-1]
    page, after = get_log(client, tenant, order="desc", until=f"{boundary:.3f}", limit=5)
    assert page == everything[24:19:-1] and after is not None
    assert get_log(client, tenant, order="desc", until=f"{boundary:.3f}", after=after)[0] == \
        everything[19::-1]
    # an after later than until: until wins
    top = get_log(client, tenant, order="desc", limit=1)[1]
    assert top is not None
    assert get_log(client, tenant, order="desc", until=f"{boundary:.3f}", after=top)[0] == older


@pytest.mark.slow
@pytest.mark.parametrize("buffered", [decisionlog.BUFFERED_PAGE_BYTES, 0],
                         ids=["sent-whole", "streamed"])
def test_rank_log_has_slots_with_id_hashes_propensities_and_clicks(
        client: TestClient, tenant: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        buffered: int) -> None:
    monkeypatch.setattr(decisionlog, "BUFFERED_PAGE_BYTES", buffered)
    r = client.post("/v1/models", json={"model_id": "r", "task": "rank", "n_features": 3,
                                        "n_action_features": 2, "slots": 3, "seed": 0},
                    headers=tenant)
    assert r.status_code == 201, r.text
    rng = np.random.default_rng(0)
    actions = [{"id": f"item-{i}", "features": rng.standard_normal(2).tolist()}
               for i in range(6)]
    r = client.post("/v1/models/r/rank", json={"features": [1.0, 0.5, -0.2],
                                               "actions": actions}, headers=tenant)
    assert r.status_code == 200, r.text
    ranked = r.json()
    clicked = ranked["ranking"][1]["id"]
    assert post_feedback(client, tenant, {"event_id": ranked["event_id"], "clicks": [clicked]},
                         model="r").status_code == 202
    sync(client, tenant, "r")
    (line,), _ = get_log(client, tenant, "r")
    assert line["event_id"] == ranked["event_id"]
    np.testing.assert_allclose(line["features"], [1.0, 0.5, -0.2])
    features = {a["id"]: a["features"] for a in actions}
    assert [s["slot"] for s in line["slots"]] == [0, 1, 2]
    assert line["n_candidates"] == 6
    for slot, shown in zip(line["slots"], ranked["ranking"], strict=True):
        assert slot["id"] == shown["id"]  # the id sent, from the model's id table
        assert slot["id_hash"] == int(item_hashes([shown["id"]])[0])
        np.testing.assert_allclose(slot["features"], features[shown["id"]])
        assert slot["propensity"] == shown["probability"]
        assert slot["click"] == (1.0 if shown["id"] == clicked else 0.0)


@pytest.mark.slow
def test_the_id_table_keeps_each_id_once_up_to_its_capacity_and_goes_with_the_model(
        client: TestClient, tenant: dict[str, str], redis_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.store.events, "MAX_ITEM_IDS", 8)
    r = client.post("/v1/models", json={"model_id": "r", "task": "rank", "n_features": 1,
                                        "n_action_features": 1, "slots": 2, "seed": 0},
                    headers=tenant)
    assert r.status_code == 201, r.text
    requests = [{"features": [1.0], "actions": [{"id": f"ü-{k}-{i}", "features": [float(i)]}
                                                for i in range(3)]} for k in range(6)]
    r = client.post("/v1/models/r/rank", json={"requests": requests}, headers=tenant)
    assert r.status_code == 200, r.text
    shown = [[s["id"] for s in result["ranking"]] for result in r.json()["results"]]
    for result in r.json()["results"]:
        assert post_feedback(client, tenant, {"event_id": result["event_id"], "clicks": []},
                             model="r").status_code == 202
    sync(client, tenant, "r")
    lines, _ = get_log(client, tenant, "r")
    logged = [[s["id"] for s in line["slots"]] for line in lines]
    kept = [i for ids in shown for i in ids][:8]  # the first 8 shown (all distinct)
    assert logged == [[i if i in kept else None for i in ids] for ids in shown]
    db = redis.Redis.from_url(redis_url)
    mk = ModelKeys("acme", "r")
    assert db.hlen(mk.item_ids) == 8
    assert client.delete("/v1/models/r", headers=tenant).status_code == 204
    assert not db.exists(mk.item_ids)


def test_another_tenants_model_is_404_and_bad_parameters_are_422_naming_the_field(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    other = new_tenant(client, "other")
    r = client.get("/v1/models/m1/log", headers=other)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_model"
    for params, field in (({"limit": 10_001}, "limit"), ({"after": "x"}, "after"),
                          ({"since": "yesterday"}, "since"), ({"until": "-5"}, "until"),
                          ({"order": "newest"}, "order")):
        r = client.get("/v1/models/m1/log", params=params, headers=tenant)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["error"]["field"] == field, r.json()


@pytest.mark.slow
def test_newest_first_after_the_oldest_possible_position_is_an_empty_last_page(
        client: TestClient, tenant: dict[str, str]) -> None:
    new_model(client, tenant)
    play_label(client, tenant, 3)
    sync(client, tenant)
    assert get_log(client, tenant, order="desc", after="0-0") == ([], None)
    assert len(get_log(client, tenant, order="desc", after="0-0:0")[0]) == 0
    assert len(get_log(client, tenant, after="0-0")[0]) == 3


@pytest.mark.slow
def test_a_small_page_reads_few_entries_from_redis(
        client: TestClient, tenant: dict[str, str], log_read_counts: list[int]) -> None:
    new_model(client, tenant)
    for seed in range(3):  # three batches
        play_label(client, tenant, 4, seed=seed)
        sync(client, tenant)
    counts = log_read_counts
    counts.clear()
    # a batch can hold up to 8x the trainer's batch size: one line needs one entry, not 16
    assert len(get_log(client, tenant, limit=1)[0]) == 1 and counts == [1]
    counts.clear()
    lines, after = get_log(client, tenant, limit=6, order="desc")
    assert len(lines) == 6 and after is not None and counts == [1, 2]


#: Bytes a page may hold in the test: a few of its lines (each about 330 bytes).
PAGE_BYTES = 1500


@pytest.mark.slow
def test_pages_are_bounded_by_bytes_as_well_as_lines(
        client: TestClient, tenant: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    new_model(client, tenant)
    play_label(client, tenant, 23)
    sync(client, tenant)
    everything, _ = get_log(client, tenant)
    assert len(everything) == 23
    monkeypatch.setattr(decisionlog, "MAX_PAGE_BYTES", PAGE_BYTES)
    for order, expected in (("asc", everything), ("desc", everything[::-1])):
        seen: list[dict[str, Any]] = []
        after = None
        while True:
            r = client.get("/v1/models/m1/log", headers=tenant,
                           params={"limit": 1000, "order": order, **({"after": after} if after
                                                                     else {})})
            assert r.status_code == 200 and 0 < len(r.content) <= PAGE_BYTES
            seen += [orjson.loads(line) for line in r.content.splitlines()]
            after = r.headers.get("x-next-after")
            if after is None:
                break
        assert seen == expected  # every line once, in order


@pytest.mark.slow
def test_a_streamed_page_ends_where_its_byte_bound_cut_it(
        client: TestClient, tenant: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page past BUFFERED_PAGE_BYTES (0 here: all) is streamed in chunks of
    CHUNK_LINES; the byte bound still cuts it and X-Next-After continues at the next line,
    in both orders, whatever the limit."""
    new_model(client, tenant)
    for seed in range(3):  # several entries
        play_label(client, tenant, 9, seed=seed)
        sync(client, tenant)
    everything, _ = get_log(client, tenant)
    assert len(everything) == 27
    monkeypatch.setattr(decisionlog, "MAX_PAGE_BYTES", PAGE_BYTES)
    monkeypatch.setattr(decisionlog, "BUFFERED_PAGE_BYTES", 0)
    monkeypatch.setattr(decisionlog, "CHUNK_LINES", 2)
    for order, expected in (("asc", everything), ("desc", everything[::-1])):
        for limit in (3, 1000):
            seen: list[dict[str, Any]] = []
            after = None
            cut_by_bytes = 0
            while True:
                params = {"limit": limit, "order": order, **({"after": after} if after else {})}
                r = client.get("/v1/models/m1/log", headers=tenant, params=params)
                assert r.status_code == 200 and 0 < len(r.content) <= PAGE_BYTES
                assert "content-length" not in r.headers  # streamed
                lines = r.content.splitlines()
                cut_by_bytes += len(lines) < limit and "x-next-after" in r.headers
                seen += [orjson.loads(line) for line in lines]
                after = r.headers.get("x-next-after")
                if after is None:
                    break
            assert seen == expected  # every line once, in order
            assert (cut_by_bytes > 0) == (limit == 1000)  # bytes cut the long pages only


@pytest.mark.slow
def test_a_streamed_page_holds_the_lines_its_first_read_found(
        client: TestClient, tenant: dict[str, str]) -> None:
    """The second read of a streamed page is bounded to the first read's entries and lines:
    entries appended between the two reads are not in it, in either order."""
    new_model(client, tenant)
    play_label(client, tenant, 5)
    sync(client, tenant)
    log, mk = client.app.state.ctx.store.log, ModelKeys("acme", "m1")

    def read(reader: decisionlog.PageReader) -> list[bytes]:
        async def run() -> list[bytes]:
            return [chunk async for chunk in reader.chunks()]
        return client.portal.call(run)

    for newest_first in (False, True):
        first = decisionlog.PageReader(log, mk, decisionlog.Span("-", "+", newest_first),
                                       1000, decisionlog.MAX_PAGE_BYTES)
        found = b"".join(read(first))
        assert found.count(b"\n") == first.lines >= 5 and first.next_after is None
        play_label(client, tenant, 4, seed=len(found))  # a later entry
        sync(client, tenant)
        again = decisionlog.PageReader(log, mk, first.replay_span(), first.lines, float("inf"))
        assert b"".join(read(again)) == found
